// The skeleton render against the full one, token for token, on real templates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

// A paragraph of prose and code that varies by `i`, with the outer whitespace and inner
// newlines that templates trim and keep.
std::string Text(const std::string& what, int i) {
  std::string s = (i % 3 == 0 ? "\n" : "") + what + " " + std::to_string(i) + ": ";
  for (int k = 0; k < 6; ++k) s += "the quick brown fox " + std::to_string(i * 7 + k) + " jumps, over {the} \"lazy\" dog.\n";
  s += "```cpp\nint f(int x) { return x < 3 ? x : -x; }\n```";
  return s + (i % 2 == 0 ? "\n\n" : " ");
}

// A conversation of `turns` user turns, with reasoning, a tool call and its result.
std::vector<ChatMessage> Conversation(int turns, bool end_with_tool_result) {
  std::vector<ChatMessage> m = {{.role = "system", .content = Text("You are terse", 0)}};
  for (int t = 0; t < turns; ++t) {
    m.push_back({.role = "user", .content = Text("question", t)});
    if (t == turns - 1 && !end_with_tool_result) break;
    if (t % 2 == 1) {
      m.push_back({.role = "assistant", .content = "Let me look.", .reasoning_content = Text("thinking", t),
                   .tool_calls = {{.id = "call-" + std::to_string(t), .name = "read_file",
                                   .arguments = "{\"path\": \"/src/main.cc\"}"}}});
      m.push_back({.role = "tool", .content = Text("file contents", t), .tool_call_id = "call-" + std::to_string(t),
                   .tool_name = "read_file"});
      if (t == turns - 1) break;
    }
    m.push_back({.role = "assistant", .content = Text("answer", t), .reasoning_content = Text("reasoning", t)});
  }
  return m;
}

RenderOptions Options(bool tools, bool thinking) {
  RenderOptions o;
  o.enable_thinking = thinking;
  if (tools) {
    o.tools = {{.name = "read_file",
                .description = "Reads a file.",
                .parameters = R"({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})"}};
  }
  return o;
}

class SkeletonFamilyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SkeletonFamilyTest, SkeletonEqualsFullRenderTokenForToken) {
  const Model* model = testing::LoadTestModel(GetParam());
  ASSERT_NE(model, nullptr);
  auto t = ChatTemplate::Create(*model, "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  int compared = 0;
  for (bool tools : {false, true}) {
    for (bool thinking : {true, false}) {
      for (int turns = 1; turns <= 5; ++turns) {
        for (bool tool_last : {false, true}) {
          const auto msgs = Conversation(turns, tool_last);
          const auto opts = Options(tools, thinking);
          auto full = (*t)->RenderFull(msgs, opts);
          ASSERT_TRUE(full.ok()) << full.status().ToString();
          auto fast = (*t)->RenderSkeleton(msgs, opts);
          ASSERT_TRUE(fast.has_value()) << "the skeleton did not engage: turns=" << turns;
          SCOPED_TRACE(::testing::Message() << "tools=" << tools << " thinking=" << thinking << " turns=" << turns
                                            << " tool_last=" << tool_last);
          EXPECT_EQ(model->Tokenize(fast->prompt, false, true), model->Tokenize(full->prompt, false, true));
          EXPECT_EQ(fast->prompt, full->prompt);
          EXPECT_EQ(fast->generation_prompt, full->generation_prompt);
          EXPECT_EQ(fast->additional_stops, full->additional_stops);
          EXPECT_EQ(fast->output_format.parser, full->output_format.parser);
          EXPECT_EQ(fast->output_format.format, full->output_format.format);
          EXPECT_EQ(fast->supports_thinking, full->supports_thinking);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 40);
}

INSTANTIATE_TEST_SUITE_P(Families, SkeletonFamilyTest,
                         ::testing::Values("qwen35", "qwen3", "gemma4", "granitehybrid"));

// A text holding the template's own markup stays in the skeleton as it is, and the rest
// is still stood in.
TEST(SkeletonTemplateTest, MarkupInATextKeepsThatTextWhole) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto t = ChatTemplate::Create(*model, "");
  ASSERT_TRUE(t.ok());
  auto msgs = Conversation(3, false);
  ASSERT_EQ(msgs[2].role, "assistant");
  // An earlier answer with its thinking inline: the template splits it off and drops it.
  msgs[2].content = "<think>\nhidden plan\n</think>\n\n" + Text("answer with its thinking inline", 9);
  msgs[2].reasoning_content.clear();
  // A user turn that is a tool result: the template does not count it as a query.
  ASSERT_EQ(msgs.back().role, "user");
  msgs.back().content = "<tool_response>\n" + Text("output", 9) + "\n</tool_response>";
  auto full = (*t)->RenderFull(msgs, {});
  auto fast = (*t)->RenderSkeleton(msgs, {});
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(full->prompt.find("hidden plan"), std::string::npos);
  EXPECT_EQ(fast->prompt, full->prompt);
}

// A template that looks inside a text (here: its length) makes the skeleton differ; the
// audit sees it on the first request, serves the full render, and turns the skeleton off.
TEST(SkeletonTemplateTest, AuditTurnsTheSkeletonOffWhenItDiffers) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  const std::string source = testing::LoadTestTemplate("qwen35")->source();
  auto t = ChatTemplate::Create(*model, source + "{{- messages[0].content|length }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto msgs = Conversation(3, false);
  auto full = (*t)->RenderFull(msgs, {});
  ASSERT_TRUE(full.ok());
  auto fast = (*t)->RenderSkeleton(msgs, {});
  ASSERT_TRUE(fast.has_value());
  EXPECT_NE(fast->prompt, full->prompt);
  for (int i = 0; i < ChatTemplate::kTrustAfter + 2; ++i) {
    auto r = (*t)->Render(msgs, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->prompt, full->prompt);
  }
  const auto stats = (*t)->skeleton_stats();
  EXPECT_TRUE(stats.disabled);
  EXPECT_EQ(stats.mismatches, 1);
  EXPECT_EQ(stats.fast, 0);
}

// A template that treats texts as opaque earns trust, then serves skeletons.
TEST(SkeletonTemplateTest, TrustedAfterAgreeingAudits) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto t = ChatTemplate::Create(*model, "");
  ASSERT_TRUE(t.ok());
  const auto msgs = Conversation(3, false);
  auto full = (*t)->RenderFull(msgs, {});
  ASSERT_TRUE(full.ok());
  for (int i = 0; i < ChatTemplate::kTrustAfter + 3; ++i) {
    auto r = (*t)->Render(msgs, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->prompt, full->prompt);
  }
  const auto stats = (*t)->skeleton_stats();
  EXPECT_FALSE(stats.disabled);
  EXPECT_EQ(stats.audits, ChatTemplate::kTrustAfter);
  EXPECT_EQ(stats.fast, 3);
}

// Every chat template llama.cpp ships: where the skeleton engages, it equals the full
// render; a template it would get wrong must be caught by the guards (it does not engage)
// or, failing that, by the audit.
TEST(SkeletonTemplateTest, EqualsFullRenderForEveryLlamaCppTemplate) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  const std::filesystem::path dir = std::filesystem::path(testing::LlamaModelsDir()) / "templates";
  int n_compared = 0;
  std::vector<std::string> differ;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path());
    std::stringstream source;
    source << in.rdbuf();
    auto t = ChatTemplate::Create(*model, source.str());
    if (!t.ok()) continue;  // a template this build cannot load renders nothing either way
    for (bool tools : {false, true}) {
      for (int turns : {2, 4}) {
        const auto msgs = Conversation(turns, false);
        auto full = (*t)->RenderFull(msgs, Options(tools, true));
        if (!full.ok()) continue;
        auto fast = (*t)->RenderSkeleton(msgs, Options(tools, true));
        if (!fast) continue;
        ++n_compared;
        if (fast->prompt != full->prompt || fast->output_format.parser != full->output_format.parser ||
            fast->generation_prompt != full->generation_prompt) {
          differ.push_back(entry.path().filename().string() + (tools ? " tools" : "") + " turns=" + std::to_string(turns));
        }
      }
    }
  }
  EXPECT_GE(n_compared, 100);
  EXPECT_TRUE(differ.empty()) << ::testing::PrintToString(differ);
}

}  // namespace
}  // namespace hearth::engine
