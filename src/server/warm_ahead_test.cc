#include "server/warm_ahead.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "testing/test_env.h"

namespace hearth::server {
namespace {

// Shadow targets must never promise tokens the next request will not carry: for every
// prefix of a reply, the target is a prefix of what warm-ahead renders once the reply is
// complete. Real Qwen3.5 template and tokenizer.
class PlanShadowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    tmpl_ = testing::LoadTestTemplate("qwen35");
    ASSERT_TRUE(model_ != nullptr && tmpl_ != nullptr);
    builder_ = std::make_unique<RequestBuilder>(*model_, *tmpl_, 8192, "test");
  }

  api::GenerationRequest Request(bool think) const {
    api::GenerationRequest r;
    r.enable_thinking = think;
    r.messages.push_back({.role = "system", .content = "You are terse."});
    r.messages.push_back({.role = "user", .content = "Explain prefix caching, briefly."});
    return r;
  }

  std::vector<engine::Token> Final(const api::GenerationRequest& request, const api::Completion& reply) const {
    auto task = PlanWarmAhead(*builder_, request, reply);
    EXPECT_TRUE(task.has_value());
    return task ? task->prompt : std::vector<engine::Token>{};
  }

  // Feeds `reply` to PlanShadow a character at a time (reasoning first, then content)
  // and checks every target against the final rendering. Returns the longest target.
  size_t CheckAllPrefixes(const api::GenerationRequest& request, const api::Completion& reply) const {
    const auto final_tokens = Final(request, reply);
    size_t longest = 0;
    auto check = [&](const api::Completion& partial) {
      auto target = PlanShadow(*builder_, request, partial);
      if (!target) return;
      ASSERT_LE(target->tokens.size(), final_tokens.size());
      ASSERT_TRUE(std::equal(target->tokens.begin(), target->tokens.end(), final_tokens.begin()))
          << "reasoning=\"" << partial.reasoning << "\" content=\"" << partial.content << "\"";
      EXPECT_TRUE(reply.content.starts_with(target->basis_content));
      EXPECT_TRUE(reply.reasoning.starts_with(target->basis_reasoning));
      longest = std::max(longest, target->tokens.size());
      // Once the reply is complete, the target continued in place is the final rendering.
      if (auto spliced = FinalShadowTokens(*target, reply, Tokenize())) {
        ASSERT_EQ(spliced->tokens, final_tokens) << "content=\"" << partial.content << "\"";
        ++spliced_;
      }
    };
    api::Completion partial;
    for (size_t i = 1; i <= reply.reasoning.size(); ++i) {
      partial.reasoning = reply.reasoning.substr(0, i);
      check(partial);
    }
    for (size_t i = 1; i <= reply.content.size(); ++i) {
      partial.content = reply.content.substr(0, i);
      check(partial);
    }
    if (!reply.tool_calls.empty()) {
      partial.tool_calls = reply.tool_calls;
      check(partial);
    }
    return longest;
  }

  // The target while the reply's content so far is `content`.
  std::optional<ShadowTarget> TargetWhileWriting(const api::GenerationRequest& request, const std::string& content) const {
    api::Completion partial;
    partial.content = content;
    return PlanShadow(*builder_, request, partial);
  }

  std::function<std::vector<engine::Token>(const std::string&)> Tokenize() const {
    return [this](const std::string& text) { return builder_->TokenizeRendered(text); };
  }

  mutable int spliced_ = 0;  // targets CheckAllPrefixes continued to the final rendering
  const engine::Model* model_ = nullptr;
  const engine::ChatTemplate* tmpl_ = nullptr;
  std::unique_ptr<RequestBuilder> builder_;
};

// Warm-ahead ends where the next message's own content starts: found from one render
// (where the text before the placeholder stops matching the rendering's tokens), it is
// where two renders with different placeholders part.
TEST_F(PlanShadowTest, WarmAheadEndsWhereTwoPlaceholdersPart) {
  auto two_renders = [&](const api::GenerationRequest& request, const api::Completion& reply) {
    auto a = builder_->Render(NextRequest(request, reply, "first placeholder text"));
    auto b = builder_->Render(NextRequest(request, reply, "Second, other text"));
    const auto& ta = std::get<BuildResult>(a).task.prompt;
    const auto& tb = std::get<BuildResult>(b).task.prompt;
    return std::vector<engine::Token>(ta.begin(), ta.begin() + static_cast<std::ptrdiff_t>(engine::CommonPrefix(ta, tb)));
  };
  api::Completion plain;
  plain.content = "Keep states at message ends.";
  api::Completion thought = plain;
  thought.reasoning = "Short answer wanted.";
  api::Completion calls;
  calls.content = "Reading two files.";
  calls.tool_calls = {{"call_1", "read", R"({"path":"a.txt"})"}, {"call_2", "read", R"({"path":"b.txt"})"}};
  api::Completion cut = plain;
  cut.content = "Keep states at mess";
  cut.finish_reason = api::FinishReason::kCancelled;
  auto with_tools = Request(false);
  with_tools.tools.push_back({"read", "Reads a file.", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  const std::vector<std::pair<api::GenerationRequest, api::Completion>> cases = {
      {Request(false), plain}, {Request(true), thought}, {with_tools, calls}, {Request(false), cut}};
  for (const auto& [request, reply] : cases) {
    SCOPED_TRACE(reply.content);
    const auto expected = two_renders(request, reply);
    ASSERT_GT(expected.size(), 10u);
    EXPECT_EQ(Final(request, reply), expected);
  }
}

// Warm-ahead's render is remembered, and the next request's own contents are spliced into
// it instead of the conversation being rendered again: the task is the one a builder that
// never saw the conversation makes.
TEST_F(PlanShadowTest, TheNextRequestIsSplicedIntoWarmAheadsRender) {
  auto fresh_template = engine::ChatTemplate::Create(*model_, tmpl_->source());
  ASSERT_TRUE(fresh_template.ok());
  const RequestBuilder fresh(*model_, **fresh_template, 8192, "test");
  api::Completion plain;
  plain.content = "Keep states at message ends.";
  plain.reasoning = "Short answer wanted.";
  api::Completion calls;
  calls.content = "Reading two files.";
  calls.tool_calls = {{"call_1", "read", R"({"path":"a.txt"})"}, {"call_2", "read", R"({"path":"b.txt"})"}};
  auto with_tools = Request(true);
  with_tools.tools.push_back({"read", "Reads a file.", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  const std::vector<std::pair<api::GenerationRequest, api::Completion>> cases = {{Request(true), plain},
                                                                                  {with_tools, calls}};
  for (const auto& [request, reply] : cases) {
    SCOPED_TRACE(reply.content);
    ASSERT_TRUE(PlanWarmAhead(*builder_, request, reply).has_value());
    api::GenerationRequest next = NextRequest(request, reply, "placeholder");
    for (size_t i = request.messages.size() + 1; i < next.messages.size(); ++i) {
      next.messages[i].content = "  what the client sent " + std::to_string(i) + "\n";
    }
    const size_t before = tmpl_->n_spliced();
    auto spliced = builder_->Build(next);
    auto whole = fresh.Build(next);
    ASSERT_TRUE(std::holds_alternative<BuildResult>(spliced) && std::holds_alternative<BuildResult>(whole));
    EXPECT_EQ(tmpl_->n_spliced(), before + 1);
    const GenerationTask& a = std::get<BuildResult>(spliced).task;
    const GenerationTask& b = std::get<BuildResult>(whole).task;
    EXPECT_EQ(a.prompt, b.prompt);
    EXPECT_EQ(a.snapshot_positions, b.snapshot_positions);
    EXPECT_EQ(a.generation_start, b.generation_start);
    EXPECT_EQ(a.stop, b.stop);
    EXPECT_EQ(a.output_format, b.output_format);
  }
}

TEST_F(PlanShadowTest, TargetsArePrefixesOfTheFinalRenderingWithoutThinking) {
  api::Completion reply;
  reply.content = "A prefix cache keeps states.\nReuse them: no recompute, ever!  Done.\n\nEnd";
  const auto request = Request(false);
  const size_t longest = CheckAllPrefixes(request, reply);
  // Everything but the last word and the closing tokens was known before the end, and
  // most targets can be continued to the end once the reply is complete.
  EXPECT_GE(longest + 8, Final(request, reply).size());
  EXPECT_GT(spliced_, static_cast<int>(reply.content.size()) / 2);
}

// Code, punctuation runs, digits and text in other scripts, as random-weight models emit.
TEST_F(PlanShadowTest, TargetsArePrefixesOfTheFinalRenderingForCodeAndMixedScripts) {
  api::Completion reply;
  reply.content =
      "ObjectMapper(ppHBoxLayout, 12) {return x.y;}\n\n淘宝花椒 nutrient...\tHttpStatus::OK == 200?!\n- item 3";
  const auto request = Request(false);
  const size_t longest = CheckAllPrefixes(request, reply);
  EXPECT_GE(longest + 8, Final(request, reply).size());
  EXPECT_GT(spliced_, static_cast<int>(reply.content.size()) / 2);
}

TEST_F(PlanShadowTest, TargetsArePrefixesOfTheFinalRenderingWithThinking) {
  api::Completion reply;
  reply.reasoning = "The user wants brevity. Say it in two lines.";
  reply.content = "States are kept at message ends, and reused.";
  const auto request = Request(true);
  const size_t longest = CheckAllPrefixes(request, reply);
  EXPECT_GE(longest + 8, Final(request, reply).size());
  EXPECT_GT(spliced_, static_cast<int>(reply.content.size()) / 2);
}

// A random model often reasons until it runs out of tokens. The template drops the
// reasoning of past turns, so even then the reply's turn can be closed in place.
TEST_F(PlanShadowTest, AReplyThatNeverLeftItsReasoningIsClosedInPlace) {
  api::Completion reply;
  reply.reasoning = "Caches keep states; the user asked for brevity, so";
  const auto request = Request(true);
  CheckAllPrefixes(request, reply);
  EXPECT_GT(spliced_, static_cast<int>(reply.reasoning.size()) / 2);
}

// A reply cut off in its first word still has a target that can be closed in place.
TEST_F(PlanShadowTest, AReplyInItsFirstWordCanBeClosedInPlace) {
  const auto request = Request(false);
  auto target = TargetWhileWriting(request, "Hel");
  ASSERT_TRUE(target.has_value());
  api::Completion reply;
  reply.content = "Hello";
  auto final_tokens = FinalShadowTokens(*target, reply, Tokenize());
  ASSERT_TRUE(final_tokens.has_value());
  EXPECT_EQ(final_tokens->tokens, Final(request, reply));
}

// A client that cut the reply off may have read less than the target was rendered from
// (generation runs ahead of delivery): the target is closed where the client stopped
// reading, as the next request renders it, or not at all.
TEST_F(PlanShadowTest, ACutOffReplyShorterThanTheTargetIsClosedWhereItsClientStopped) {
  const auto request = Request(false);
  const std::string written = "Use the <b>cache</b> here: states are kept at message ends and reused, wholly";
  auto target = TargetWhileWriting(request, written);
  ASSERT_TRUE(target.has_value());
  ASSERT_TRUE(target->splice);
  ASSERT_GT(target->basis_content.size(), 40u);
  int closed = 0;
  for (size_t n = 1; n < target->basis_content.size(); ++n) {
    api::Completion read;
    read.content = written.substr(0, n);
    auto got = FinalShadowTokens(*target, read, Tokenize());
    const bool cut_open = read.content.rfind('<') != std::string::npos &&
                          read.content.find('>', read.content.rfind('<')) == std::string::npos;
    const bool trimmed = std::isspace(static_cast<unsigned char>(read.content.back())) != 0;
    if (cut_open || trimmed) {
      EXPECT_FALSE(got.has_value()) << "\"" << read.content << "\"";
      continue;
    }
    ASSERT_TRUE(got.has_value()) << "\"" << read.content << "\"";
    EXPECT_EQ(got->tokens, Final(request, read)) << "\"" << read.content << "\"";
    ++closed;
  }
  EXPECT_GT(closed, static_cast<int>(target->basis_content.size()) / 2);
}

// A target is continued in place only where nothing the template reworks is involved:
// otherwise FinalShadowTokens says nothing, and never something wrong.
TEST_F(PlanShadowTest, FinalTokensOnlyWhereTheTemplateCannotReworkTheRest) {
  const auto request = Request(false);
  api::Completion partial;
  partial.content = "States are kept at message ends and reused, wholly";
  auto target = TargetWhileWriting(request, partial.content);
  ASSERT_TRUE(target.has_value());
  ASSERT_FALSE(target->content_rendered.empty());
  auto final_of = [&](const std::string& content) {
    api::Completion reply;
    reply.content = content;
    return FinalShadowTokens(*target, reply, Tokenize());
  };
  // Plain words and punctuation: exactly the final rendering.
  for (const std::string ending : {"", " wholly.", " wholly! Done", " wholly\n\nx = 12;"}) {
    api::Completion reply;
    reply.content = partial.content + ending;
    auto got = final_of(reply.content);
    ASSERT_TRUE(got.has_value()) << ending;
    EXPECT_EQ(got->tokens, Final(request, reply)) << ending;
    // The reply's content ends where its turn's closing tokens begin.
    const std::string closing = model_->Detokenize(
        std::vector<engine::Token>(got->tokens.begin() + static_cast<std::ptrdiff_t>(got->content_end), got->tokens.end()), true);
    EXPECT_TRUE(closing.starts_with("<|im_end|>")) << closing;
  }
  EXPECT_FALSE(final_of(partial.content + " wholly.\n").has_value());       // trimmed by the template
  EXPECT_FALSE(final_of(partial.content + " </think> moved").has_value());  // markup the template may move
  EXPECT_FALSE(final_of(partial.content + " \xe6\xb7").has_value());        // cut inside a character
  EXPECT_FALSE(final_of("Something else entirely").has_value());           // not what the target was from
  api::Completion with_call;
  with_call.content = partial.content + ".";
  with_call.tool_calls.push_back({"call_1", "read_file", "{}"});
  EXPECT_FALSE(FinalShadowTokens(*target, with_call, Tokenize()).has_value());
  api::Completion with_reasoning;
  with_reasoning.content = partial.content;
  with_reasoning.reasoning = "thought of later";
  EXPECT_FALSE(FinalShadowTokens(*target, with_reasoning, Tokenize()).has_value());
}

// Before a tool call shows up the shadow cannot know one is coming (the engine drops a
// shadow whose target changes under it); once it has, targets stop before the calls,
// whose arguments are re-serialized only when complete.
TEST_F(PlanShadowTest, WithToolCallsTargetsStopBeforeTheCalls) {
  api::Completion reply;
  reply.reasoning = "I should read the file first.";
  reply.content = "Reading it.";
  reply.tool_calls.push_back({"call_1", "read_file", R"({"path": "src/main.cc"})"});
  auto request = Request(true);
  request.tools.push_back({"read_file", "Reads a file", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  const auto final_tokens = Final(request, reply);
  api::Completion partial = reply;
  partial.tool_calls[0].arguments = R"({"pa)";  // still streaming
  auto target = PlanShadow(*builder_, request, partial);
  ASSERT_TRUE(target.has_value());
  ASSERT_LE(target->tokens.size(), final_tokens.size());
  EXPECT_TRUE(std::equal(target->tokens.begin(), target->tokens.end(), final_tokens.begin()));
  const std::string text = model_->Detokenize(target->tokens, true);
  EXPECT_NE(text.find("Reading", text.size() - 16), std::string::npos) << text.substr(text.size() - 40);
  EXPECT_EQ(text.find("<function=read_file>"), std::string::npos);
}

// The planner renders only the conversation's tail after checking it once; its targets
// must be exactly what rendering the whole conversation gives.
TEST_F(PlanShadowTest, PlannerRenderingTheTailGivesTheSameTargets) {
  for (bool think : {false, true}) {
    auto request = Request(think);
    for (int i = 0; i < 12; ++i) {
      request.messages.push_back({.role = "assistant", .content = "Reply " + std::to_string(i) + ": states are kept."});
      request.messages.push_back({.role = "user", .content = "Question " + std::to_string(i + 1) + ", and why?"});
    }
    auto built = builder_->Render(request);
    ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
    ShadowPlanner planner(*builder_, std::make_shared<api::GenerationRequest>(request),
                          std::get<BuildResult>(built).task.prompt);
    api::Completion reply;
    if (think) reply.reasoning = "Think about it: the tree keeps them.";
    reply.content = "Because the tree keeps every state where a prompt can arrive.\n\nThat is all.";
    api::Completion partial;
    int compared = 0;
    auto check = [&] {
      auto expected = PlanShadow(*builder_, request, partial);
      auto got = planner.Plan(partial);
      ASSERT_EQ(expected.has_value(), got.has_value());
      if (!expected) return;
      EXPECT_EQ(got->tokens, expected->tokens) << "content=\"" << partial.content << "\"";
      EXPECT_EQ(got->basis_content, expected->basis_content);
      ++compared;
    };
    for (size_t i = 1; i <= reply.reasoning.size(); i += 3) {
      partial.reasoning = reply.reasoning.substr(0, i);
      check();
    }
    partial.reasoning = reply.reasoning;
    int spliced = 0;
    for (size_t i = 1; i <= reply.content.size(); i += 3) {
      partial.content = reply.content.substr(0, i);
      check();
      auto expected = PlanShadow(*builder_, request, partial);
      auto got = planner.Plan(partial);
      if (!expected || !got) continue;
      auto expected_final = FinalShadowTokens(*expected, reply, Tokenize());
      auto got_final = FinalShadowTokens(*got, reply, Tokenize());
      ASSERT_EQ(got_final.has_value(), expected_final.has_value());
      if (expected_final) {
        EXPECT_EQ(got_final->tokens, expected_final->tokens) << "content=\"" << partial.content << "\"";
        EXPECT_EQ(got_final->content_end, expected_final->content_end);
      }
      spliced += expected_final.has_value() ? 1 : 0;
    }
    EXPECT_GT(compared, 10);
    EXPECT_GT(spliced, 5);
    EXPECT_TRUE(planner.uses_tail()) << "think=" << think;
  }
}

TEST_F(PlanShadowTest, RawCompletionsHaveNoTarget) {
  api::GenerationRequest r;
  r.flavor = api::Flavor::kOpenAICompletion;
  r.prompt = "Once upon a time";
  api::Completion partial;
  partial.content = "there was a cache";
  EXPECT_FALSE(PlanShadow(*builder_, r, partial).has_value());
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

TEST(StableTextLengthTest, KeepsWhatMoreTextCannotRetokenize) {
  auto stable = [](std::string_view t) { return std::string(t.substr(0, StableTextLength(t))); };
  EXPECT_EQ(stable("hello wor"), "hello");         // the word may go on
  EXPECT_EQ(stable("hello world "), "hello world"); // a word followed by a space is complete
  EXPECT_EQ(stable("call(foo"), "call");            // "(foo" is one piece
  EXPECT_EQ(stable("x = 12"), "x = 12");            // digits are single pieces
  EXPECT_EQ(stable("end.\n"), "end");               // ".\n" may grow into ".\n\n"
  EXPECT_EQ(stable("a, b..."), "a, b");             // a punctuation run may grow
  EXPECT_EQ(stable("淘宝花椒"), "");                 // letters all the way
  EXPECT_EQ(stable("数据 淘宝"), "数据");
  EXPECT_EQ(stable(""), "");
  EXPECT_EQ(stable("   "), "");
}

}  // namespace
}  // namespace hearth::server
