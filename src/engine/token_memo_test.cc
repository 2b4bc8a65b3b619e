#include "engine/token_memo.h"

#include <gtest/gtest.h>

#include "engine/chat_template.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

class TokenMemoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    tmpl_ = testing::LoadTestTemplate("qwen35");
    ASSERT_TRUE(model_ != nullptr && tmpl_ != nullptr);
    marker_ = model_->Tokenize("<|im_start|>", false, true);
    ASSERT_EQ(marker_.size(), 1u);
  }
  std::vector<Token> Whole(const std::string& text) const { return model_->Tokenize(text, false, true); }

  const Model* model_ = nullptr;
  const ChatTemplate* tmpl_ = nullptr;
  std::vector<Token> marker_;
};

TEST_F(TokenMemoTest, PiecesTokenizeLikeTheWholeText) {
  auto memo = TokenMemo::Create(*model_, marker_[0]);
  ASSERT_NE(memo, nullptr);
  const std::string m = "<|im_start|>";
  for (const std::string& text : std::vector<std::string>{
           std::string(), m, m + m, "plain text, no marker", m + "user\nhi<|im_end|>\n" + m + "assistant\n",
        "  leading spaces\n\n\n" + m + "user\n   \n" + m, "tail without marker " + m + "x",
        "<|im_start" + std::string("|> not quite") + m + "<|im_end|><|im_start|><|im_end|>",
        "数字 123 456\t\t" + m + "user\n😀 🚀 — ‘quotes’ \r\n" + m + "assistant\n<think>\n\n</think>\n\n",
        "x" + m + "\n" + m + " " + m + "\n\n"}) {
    EXPECT_EQ(memo->Tokenize(text), Whole(text)) << text;
    EXPECT_EQ(memo->Tokenize(text), Whole(text)) << "remembered: " << text;
  }
}

// A growing conversation rendered by the real template, with reasoning and tool calls:
// every render tokenizes as a whole, and earlier messages come from memory.
TEST_F(TokenMemoTest, AGrowingConversationReusesItsMessages) {
  auto memo = TokenMemo::Create(*model_, marker_[0]);
  ASSERT_NE(memo, nullptr);
  std::vector<ChatMessage> msgs = {{.role = "system", .content = "You are terse.\n\n  Indented rule."}};
  RenderOptions o;
  o.tools.push_back({.name = "read_file", .description = "Reads a file.",
                     .parameters = R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  for (int turn = 0; turn < 6; ++turn) {
    msgs.push_back({.role = "user", .content = "Question " + std::to_string(turn) + ":  why?\n"});
    auto r = tmpl_->Render(msgs, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const size_t hits = memo->hits();
    EXPECT_EQ(memo->Tokenize(r->prompt), Whole(r->prompt)) << r->prompt;
    if (turn > 0) {
      EXPECT_GE(memo->hits(), hits + 2) << "earlier messages were tokenized again";
    }
    ChatMessage reply{.role = "assistant", .content = "Because " + std::string(turn, '!') + " ",
                      .reasoning_content = "thinking about " + std::to_string(turn)};
    if (turn % 2 == 1) reply.tool_calls.push_back({.id = "c" + std::to_string(turn), .name = "read_file",
                                                   .arguments = R"({"path": "a b.txt"})"});
    msgs.push_back(reply);
    if (turn % 2 == 1) {
      msgs.push_back({.role = "tool", .content = "file  contents\n", .tool_call_id = "c" + std::to_string(turn),
                      .tool_name = "read_file"});
    }
  }
}

TEST_F(TokenMemoTest, RefusesAMarkerThatIsNotASplitPoint) {
  const auto plain = model_->Tokenize("hello", false, false);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(TokenMemo::Create(*model_, plain[0]), nullptr);
}

TEST_F(TokenMemoTest, StaysWithinItsBound) {
  auto memo = TokenMemo::Create(*model_, marker_[0], /*max_bytes=*/256);
  ASSERT_NE(memo, nullptr);
  std::string text;
  for (int i = 0; i < 50; ++i) text += "<|im_start|>user\nmessage number " + std::to_string(i) + "<|im_end|>\n";
  EXPECT_EQ(memo->Tokenize(text), Whole(text));
  const size_t misses = memo->misses();
  EXPECT_EQ(memo->Tokenize(text), Whole(text));
  EXPECT_GT(memo->misses(), misses) << "a 256-byte memo cannot hold 50 messages";
}

}  // namespace
}  // namespace hearth::engine
