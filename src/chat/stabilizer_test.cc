#include "chat/stabilizer.h"

#include <gtest/gtest.h>

namespace hearth::chat {
namespace {

std::vector<api::Message> Conversation(const std::string& system) {
  return {{.role = "system", .content = system},
          {.role = "user", .content = "first question"},
          {.role = "assistant", .content = "an answer"},
          {.role = "user", .content = "next question"}};
}

TEST(StabilizerTest, MovesIdsAndTimestampsToTheEndOfTheLastMessage) {
  auto s = Stabilizer::Parse({"uuid", "timestamp"}, StabilizeMode::kMoveToEnd);
  ASSERT_TRUE(s.ok());
  auto a = Conversation("Request 3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f at 2026-11-30T03:59:12Z. Be brief.");
  auto b = Conversation("Request 0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d at 2026-11-30T04:01:44.120+01:00. Be brief.");
  EXPECT_EQ(s->Apply(a), 2);
  EXPECT_EQ(s->Apply(b), 2);
  EXPECT_EQ(a[0].content, b[0].content) << "the early part no longer changes between requests";
  EXPECT_EQ(a[0].content, "Request  at . Be brief.");
  EXPECT_NE(a.back().content.find("3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f"), std::string::npos);
  EXPECT_NE(a.back().content.find("2026-11-30T03:59:12Z"), std::string::npos);
  EXPECT_TRUE(a.back().content.starts_with("next question\n\n"));
}

TEST(StabilizerTest, DropModeRemovesAndTheLastMessageIsLeftAlone) {
  auto s = Stabilizer::Parse({"claude-billing"}, StabilizeMode::kDrop);
  ASSERT_TRUE(s.ok());
  auto a = Conversation(
      "x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=a5145;You are Claude Code.");
  a.back().content = "x-anthropic-billing-header: cch=1; keep me";
  EXPECT_EQ(s->Apply(a), 1);
  EXPECT_EQ(a[0].content, "You are Claude Code.");
  EXPECT_EQ(a.back().content, "x-anthropic-billing-header: cch=1; keep me");
}

TEST(StabilizerTest, CustomRegexAndErrors) {
  auto s = Stabilizer::Parse({"re:session=[0-9]+"}, StabilizeMode::kDrop);
  ASSERT_TRUE(s.ok());
  auto a = Conversation("session=12345 hello");
  EXPECT_EQ(s->Apply(a), 1);
  EXPECT_EQ(a[0].content, " hello");
  EXPECT_EQ(Stabilizer::Parse({"nonsense"}, StabilizeMode::kDrop).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Stabilizer::Parse({"re:(unclosed"}, StabilizeMode::kDrop).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Stabilizer().Apply(a), 0);
}

// A header line megabytes long: std::regex's recursive matcher ran out of stack on it and
// took the whole server down; a linear-time matcher handles it like any other line.
TEST(StabilizerTest, MegabyteLongBillingLineIsMatchedWithoutCrashing) {
  auto s = Stabilizer::Parse({"claude-billing"}, StabilizeMode::kDrop);
  ASSERT_TRUE(s.ok());
  std::string fields;
  while (fields.size() < 4'000'000) fields += " k=v;";
  auto a = Conversation("x-anthropic-billing-header:" + fields + "You are Claude Code.");
  EXPECT_EQ(s->Apply(a), 1);
  EXPECT_EQ(a[0].content, "You are Claude Code.");
  // Never closed by ';': no match, and the text is left as it was.
  const std::string open = "x-anthropic-billing-header:" + std::string(4'000'000, 'a');
  auto b = Conversation(open);
  EXPECT_EQ(s->Apply(b), 0);
  EXPECT_EQ(b[0].content, open);
}

// Patterns the linear-time engine cannot run (backreferences, lookaround) are refused at
// start-up with a message naming the pattern, rather than failing on some later request.
TEST(StabilizerTest, PatternsWithoutALinearTimeMatcherAreRefusedAtStartUp) {
  for (const std::string spec : {"re:(a)\\1", "re:foo(?=bar)", "re:(?<!x)y"}) {
    auto s = Stabilizer::Parse({spec}, StabilizeMode::kDrop);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(spec), std::string::npos) << s.status().message();
  }
}

// Presets keep their meaning: word boundaries for ULIDs, several matches in one message.
TEST(StabilizerTest, PresetsMatchWhatTheyMatchedBefore) {
  auto s = Stabilizer::Parse({"ulid", "uuid"}, StabilizeMode::kDrop);
  ASSERT_TRUE(s.ok());
  auto a = Conversation(
      "a 01ARZ3NDEKTSV4RRFFQ69G5FAV b X01ARZ3NDEKTSV4RRFFQ69G5FAV c "
      "3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f,0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d.");
  EXPECT_EQ(s->Apply(a), 3);
  EXPECT_EQ(a[0].content, "a  b X01ARZ3NDEKTSV4RRFFQ69G5FAV c ,.");
}

}  // namespace
}  // namespace hearth::chat
