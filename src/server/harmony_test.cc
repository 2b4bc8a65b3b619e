// Warm-ahead and shadow targets on gpt-oss's harmony template (the real
// openai-gpt-oss-120b.jinja, the tiny gpt-oss model's tokenizer). Harmony re-renders
// history in two ways the Qwen tests do not cover: a reply's analysis channel is never
// rendered again once the reply is final, and a tool call's preamble, rendered as analysis
// while the tool loop goes on, is dropped from every earlier call as soon as a final
// answer follows. Targets must be the re-rendered form, and the request must keep a state
// where the re-rendered loop leaves its prompt, for the shadow to start over from.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>

#include "server/request_builder.h"
#include "server/warm_ahead.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

class HarmonyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("gpt-oss");
    tmpl_ = testing::LoadTestTemplate("gpt-oss");
    ASSERT_TRUE(model_ != nullptr && tmpl_ != nullptr);
    builder_ = std::make_unique<RequestBuilder>(*model_, *tmpl_, 8192, "test");
  }

  GenerationTask Build(const api::GenerationRequest& r) const {
    auto built = builder_->Build(r);
    EXPECT_TRUE(std::holds_alternative<BuildResult>(built));
    return std::holds_alternative<BuildResult>(built) ? std::get<BuildResult>(built).task : GenerationTask{};
  }

  std::string Text(const std::vector<engine::Token>& t) const { return model_->Detokenize(t, true); }

  // For every prefix of `reply` (reasoning, then content), the shadow's target is a prefix
  // of what warm-ahead renders for the complete reply. Returns that rendering.
  std::vector<engine::Token> CheckTargets(const api::GenerationRequest& request, const api::Completion& reply) const {
    auto next = PlanWarmAhead(*builder_, request, reply);
    EXPECT_TRUE(next.has_value());
    if (!next) return {};
    size_t longest = 0;
    api::Completion partial;
    auto check = [&] {
      auto target = PlanShadow(*builder_, request, partial);
      if (!target) return;
      ASSERT_LE(target->tokens.size(), next->prompt.size());
      ASSERT_TRUE(std::equal(target->tokens.begin(), target->tokens.end(), next->prompt.begin()))
          << "reasoning=\"" << partial.reasoning << "\" content=\"" << partial.content << "\"\n"
          << Text(target->tokens);
      longest = std::max(longest, target->tokens.size());
    };
    for (size_t i = 1; i <= reply.reasoning.size(); ++i) {
      partial.reasoning = reply.reasoning.substr(0, i);
      check();
    }
    for (size_t i = 1; i <= reply.content.size(); ++i) {
      partial.content = reply.content.substr(0, i);
      check();
    }
    // Everything but the last word and the turn's closing was known before the end.
    EXPECT_GE(longest + 8, next->prompt.size());
    return next->prompt;
  }

  const engine::Model* model_ = nullptr;
  const engine::ChatTemplate* tmpl_ = nullptr;
  std::unique_ptr<RequestBuilder> builder_;
};

api::GenerationRequest Chat() {
  api::GenerationRequest r;
  r.messages.push_back({.role = "system", .content = "You are terse."});
  r.messages.push_back({.role = "user", .content = "Explain prefix caching, briefly."});
  return r;
}

// The generation prompt ("<|start|>assistant") is what history repeats before a past
// reply: generation starts at the prompt's end, and a state is kept there.
TEST_F(HarmonyTest, GenerationStartsAtThePromptsEnd) {
  const GenerationTask task = Build(Chat());
  const auto n = static_cast<int32_t>(task.prompt.size());
  EXPECT_EQ(task.generation_start, n);
  ASSERT_FALSE(task.snapshot_positions.empty());
  EXPECT_EQ(task.snapshot_positions.back(), n);
  EXPECT_TRUE(Text(task.prompt).ends_with("<|end|><|start|>assistant")) << Text(task.prompt);
}

// The analysis channel is not rendered again: targets while the reply reasons end where
// its final channel will start, and then follow the final channel as it grows.
TEST_F(HarmonyTest, TargetsDropTheRepliesAnalysis) {
  api::Completion reply;
  reply.reasoning = "The user wants it short. Two lines.";
  reply.content = "States are kept at message ends, and reused.";
  const std::string next = Text(CheckTargets(Chat(), reply));
  EXPECT_EQ(next.find("Two lines"), std::string::npos) << next;
  EXPECT_NE(next.find("<|start|>assistant<|channel|>final<|message|>States are kept"), std::string::npos) << next;
}

// An agent's tool loop: each call's preamble is rendered as analysis while the loop goes
// on, and dropped from all of them once the model answers. The shadow of the answer
// targets the loop without preambles, which leaves this prompt at the first call; the
// request keeps a state before that call's turn, so the shadow can start over there.
TEST_F(HarmonyTest, AFinalAnswerReRendersTheToolLoopWithoutItsPreambles) {
  api::GenerationRequest r = Chat();
  r.tools.push_back({"read_file", "Reads a file.", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  for (int i = 0; i < 2; ++i) {
    const std::string id = "call-" + std::to_string(i);
    r.messages.push_back({.role = "assistant",
                          .content = "Let me read file " + std::to_string(i) + " first.",
                          .tool_calls = {{.id = id, .name = "read_file", .arguments = R"({"path":"a.cc"})"}}});
    r.messages.push_back({.role = "tool", .content = "int main() {}", .tool_call_id = id, .tool_name = "read_file"});
  }
  const GenerationTask task = Build(r);
  ASSERT_NE(Text(task.prompt).find("<|channel|>analysis<|message|>Let me read file 0"), std::string::npos);

  api::Completion reply;
  reply.content = "Both files are empty programs.";
  const std::vector<engine::Token> next = CheckTargets(r, reply);
  EXPECT_EQ(Text(next).find("Let me read file"), std::string::npos) << Text(next);

  // Where the next request leaves this one: inside the first call's turn, before the
  // generation start, so the shadow forked there cannot continue; the last state kept at
  // or before that point is the user message's end, where the first call's turn opens.
  const size_t leaves = engine::CommonPrefix(next, task.prompt);
  ASSERT_LT(leaves, static_cast<size_t>(task.generation_start));
  int32_t boundary = 0;
  for (int32_t p : task.snapshot_positions) {
    if (p <= static_cast<int32_t>(leaves)) boundary = p;
  }
  const std::string before = Text(std::vector<engine::Token>(task.prompt.begin(), task.prompt.begin() + boundary));
  EXPECT_TRUE(before.ends_with("Explain prefix caching, briefly.<|end|>")) << before;
}

}  // namespace
}  // namespace hearth::server
