#include "server/request_builder.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <algorithm>
#include <span>
#include <variant>

#include "testing/test_env.h"

namespace hearth::server {
namespace {

constexpr int kCtx = 512;

class RequestBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    tmpl_ = testing::LoadTestTemplate("qwen35");
    ASSERT_TRUE(model_ != nullptr && tmpl_ != nullptr);
    builder_ = std::make_unique<RequestBuilder>(*model_, *tmpl_, kCtx, "test");
  }

  static api::GenerationRequest Raw(std::string text) {
    api::GenerationRequest r;
    r.flavor = api::Flavor::kOpenAICompletion;
    r.prompt.emplace(std::move(text));
    return r;
  }

  static api::GenerationRequest Chat(std::string text) {
    api::GenerationRequest r;
    r.messages.push_back({.role = "user", .content = std::move(text)});
    return r;
  }

  // The prompt's token count, or -1 when rendering failed.
  int PromptTokens(const api::GenerationRequest& r) const {
    auto built = builder_->Render(r);
    if (!std::holds_alternative<BuildResult>(built)) return -1;
    return static_cast<int>(std::get<BuildResult>(built).task.prompt.size());
  }

  const engine::Model* model_ = nullptr;
  const engine::ChatTemplate* tmpl_ = nullptr;
  std::unique_ptr<RequestBuilder> builder_;
};

TEST_F(RequestBuilderTest, ChatRequestBecomesTaskWithRoomForOutput) {
  api::GenerationRequest r = Chat("hello there");
  r.sampling.temperature = 0.0f;
  r.sampling.top_k = 5;
  r.stop = {"END"};
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built)) << std::get<api::ApiError>(built).message;
  const BuildResult& b = std::get<BuildResult>(built);
  EXPECT_NE(b.prompt_text.find("hello there"), std::string::npos);
  ASSERT_FALSE(b.task.prompt.empty());
  EXPECT_TRUE(b.task.output_format.has_value());
  // No max_tokens: everything the context has left.
  EXPECT_EQ(b.task.max_tokens, kCtx - static_cast<int>(b.task.prompt.size()));
  EXPECT_EQ(b.task.sampling.temperature, 0.0f);
  EXPECT_EQ(b.task.sampling.top_k, 5);
  ASSERT_FALSE(b.task.stop.empty());
  EXPECT_EQ(b.task.stop.back(), "END");
}

TEST_F(RequestBuilderTest, RawPromptHasNoOutputFormat) {
  api::GenerationRequest r = Raw("Once upon a time");
  r.max_tokens = 7;
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built)) << std::get<api::ApiError>(built).message;
  const BuildResult& b = std::get<BuildResult>(built);
  EXPECT_EQ(b.prompt_text, "Once upon a time");
  EXPECT_FALSE(b.task.output_format.has_value());
  EXPECT_EQ(b.task.max_tokens, 7);
}

TEST_F(RequestBuilderTest, PromptLongerThanContextIs400WithTheNumbers) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "word" + std::to_string(i) + " ";
  api::GenerationRequest r = Chat(text);
  const int n_prompt = PromptTokens(r);
  ASSERT_GE(n_prompt, kCtx);
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(built));
  const api::ApiError& e = std::get<api::ApiError>(built);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_NE(e.message.find(std::to_string(n_prompt)), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(std::to_string(kCtx)), std::string::npos) << e.message;
  EXPECT_EQ(e.param, "messages");

  // A raw completion blames its prompt.
  auto raw = builder_->Build(Raw(text));
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(raw));
  EXPECT_EQ(std::get<api::ApiError>(raw).param, "prompt");
}

TEST_F(RequestBuilderTest, MaxTokensBeyondContextIs400WithTheNumbers) {
  api::GenerationRequest r = Chat("hi");
  const int n_prompt = PromptTokens(r);
  ASSERT_GT(n_prompt, 0);
  const int room = kCtx - n_prompt;

  r.max_tokens = room;  // exactly fits
  EXPECT_TRUE(std::holds_alternative<BuildResult>(builder_->Build(r)));

  r.max_tokens = room + 1;
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(built));
  const api::ApiError& e = std::get<api::ApiError>(built);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  for (int n : {room + 1, n_prompt, kCtx, room}) {
    EXPECT_NE(e.message.find(std::to_string(n)), std::string::npos) << n << " missing from: " << e.message;
  }
}

TEST_F(RequestBuilderTest, AnthropicMaxTokensIsACapNotAnError) {
  api::GenerationRequest r = Chat("hi");
  r.flavor = api::Flavor::kAnthropic;
  const int room = kCtx - PromptTokens(r);
  r.max_tokens = 32000;  // Claude Code's default, far beyond this context
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  EXPECT_EQ(std::get<BuildResult>(built).task.max_tokens, room);
}

TEST_F(RequestBuilderTest, TemplateRejectionIs400) {
  api::GenerationRequest r;
  r.messages.push_back({.role = "system", .content = "only a system message"});
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(built));
  const api::ApiError& e = std::get<api::ApiError>(built);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_FALSE(e.message.empty());
  // Render (count_tokens, /apply-template) refuses it the same way.
  EXPECT_TRUE(std::holds_alternative<api::ApiError>(builder_->Render(r)));
}

// Qwen's template refuses a system message after the first turn; Claude Code sends them.
TEST_F(RequestBuilderTest, LateSystemTurnBecomesAReminderInPlace) {
  api::GenerationRequest r;
  r.messages.push_back({.role = "system", .content = "You are terse."});
  r.messages.push_back({.role = "user", .content = "say hi"});
  r.messages.push_back({.role = "system", .content = "# Environment\ncwd: /w"});
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built)) << std::get<api::ApiError>(built).message;
  const std::string& prompt = std::get<BuildResult>(built).prompt_text;
  const size_t first = prompt.find("You are terse.");
  const size_t user = prompt.find("say hi");
  const size_t reminder = prompt.find("<|im_start|>user\n<system-reminder>\n# Environment\ncwd: /w\n</system-reminder>");
  ASSERT_NE(first, std::string::npos) << prompt;
  ASSERT_NE(user, std::string::npos) << prompt;
  ASSERT_NE(reminder, std::string::npos) << prompt;
  EXPECT_LT(first, user);
  EXPECT_LT(user, reminder) << "the turn stays where it was sent";
}

// Codex sends two developer (system) messages before the first user turn; Qwen's
// template refuses the second there too.
TEST_F(RequestBuilderTest, SecondLeadingSystemMessageBecomesAReminder) {
  api::GenerationRequest r;
  r.messages.push_back({.role = "system", .content = "You are a coding agent."});
  r.messages.push_back({.role = "system", .content = "<skills>none</skills>"});
  r.messages.push_back({.role = "user", .content = "say hi"});
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built)) << std::get<api::ApiError>(built).message;
  const std::string& prompt = std::get<BuildResult>(built).prompt_text;
  const size_t reminder = prompt.find("<|im_start|>user\n<system-reminder>\n<skills>none</skills>\n</system-reminder>");
  ASSERT_NE(reminder, std::string::npos) << prompt;
  EXPECT_LT(prompt.find("You are a coding agent."), reminder);
  EXPECT_LT(reminder, prompt.find("say hi"));
}

TEST_F(RequestBuilderTest, EmptyRawPromptIs400) {
  api::GenerationRequest r = Raw("");
  auto built = builder_->Build(r);
  // A tokenizer that adds BOS would make the prompt not empty; the test model's adds none.
  ASSERT_EQ(PromptTokens(r), 0);
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(built));
  EXPECT_EQ(std::get<api::ApiError>(built).http_status, 400);
}

TEST_F(RequestBuilderTest, OutOfRangeSamplingIs400) {
  api::GenerationRequest r = Chat("hi");
  r.sampling.top_p = 7.0f;  // the API parsers range-check; the builder still must
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<api::ApiError>(built));
  EXPECT_EQ(std::get<api::ApiError>(built).http_status, 400);
}

TEST_F(RequestBuilderTest, ToolsReachThePrompt) {
  api::GenerationRequest r = Chat("what is the weather?");
  r.tools.push_back({"get_weather", "Weather for a city",
                     R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"});
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built)) << std::get<api::ApiError>(built).message;
  EXPECT_NE(std::get<BuildResult>(built).prompt_text.find("get_weather"), std::string::npos);
}

// A reply to tool results: Gemma 4's history continues the turn that called the tools,
// so the next request drops this prompt's whole generation prompt ("<|turn>model\n")
// and resumes from the tool results' end: a state is kept there. Qwen3.5's history
// reopens an assistant turn as the generation prompt does: no state there.
api::GenerationRequest AfterToolResults() {
  api::GenerationRequest r;
  r.enable_thinking = true;  // Gemma 4's generation prompt is then "<|turn>model\n" alone
  r.messages.push_back({.role = "user", .content = "Read a."});
  r.messages.push_back({.role = "assistant",
                        .content = "Reading it.",
                        .tool_calls = {{.id = "call-1", .name = "read_file", .arguments = R"({"path":"a"})"}}});
  r.messages.push_back({.role = "tool", .content = "contents of a", .tool_call_id = "call-1", .tool_name = "read_file"});
  r.tools.push_back({"read_file", "Reads a file.", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  return r;
}

std::vector<int32_t> SnapshotsAfterToolResults(std::string_view arch, std::vector<engine::Token>* prompt) {
  const engine::Model* model = testing::LoadTestModel(arch);
  const engine::ChatTemplate* tmpl = testing::LoadTestTemplate(arch);
  if (model == nullptr || tmpl == nullptr) return {};
  RequestBuilder builder(*model, *tmpl, 4096, "test");
  auto built = builder.Build(AfterToolResults());
  if (!std::holds_alternative<BuildResult>(built)) return {};
  *prompt = std::get<BuildResult>(built).task.prompt;
  return std::get<BuildResult>(built).task.snapshot_positions;
}

TEST(RequestBuilderFamiliesTest, AStateAtTheToolResultsEndWhereHistoryContinuesTheTurn) {
  std::vector<engine::Token> prompt;
  const std::vector<int32_t> gemma = SnapshotsAfterToolResults("gemma4", &prompt);
  ASSERT_FALSE(gemma.empty());
  const engine::Model* model = testing::LoadTestModel("gemma4");
  const std::string before_last =
      model->Detokenize(std::span(prompt).subspan(0, static_cast<size_t>(gemma[gemma.size() - 2])), true);
  EXPECT_TRUE(before_last.ends_with("Reading it.<turn|>\n")) << before_last;
  EXPECT_EQ(gemma.back(), static_cast<int32_t>(prompt.size()));

  const std::vector<int32_t> qwen = SnapshotsAfterToolResults("qwen35", &prompt);
  ASSERT_GE(qwen.size(), 2u);
  const engine::Model* qwen_model = testing::LoadTestModel("qwen35");
  const std::string qwen_before_last =
      qwen_model->Detokenize(std::span(prompt).subspan(0, static_cast<size_t>(qwen[qwen.size() - 2])), true);
  EXPECT_TRUE(qwen_before_last.ends_with("<|im_start|>assistant\n")) << qwen_before_last;
}

// Granite 4.0's history opens an assistant turn exactly as its generation prompt does,
// so the generation start is the prompt's end: the same prompt sent again (a retry, a
// regenerated reply) resumes from the last message's end, kept for it, and prefills
// only the generation prompt.
TEST(RequestBuilderFamiliesTest, TheLastMessagesEndIsKeptWhereTheGenerationStartIsThePromptsEnd) {
  const engine::Model* model = testing::LoadTestModel("granitehybrid");
  const engine::ChatTemplate* tmpl = testing::LoadTestTemplate("granitehybrid");
  ASSERT_TRUE(model != nullptr && tmpl != nullptr);
  RequestBuilder builder(*model, *tmpl, 4096, "test");
  api::GenerationRequest r;
  r.messages.push_back({.role = "user", .content = "Hello."});
  r.messages.push_back({.role = "assistant", .content = "Hi."});
  r.messages.push_back({.role = "user", .content = "What is a radix tree?"});
  auto built = builder.Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  const auto& task = std::get<BuildResult>(built).task;
  const auto n = static_cast<int32_t>(task.prompt.size());
  EXPECT_EQ(task.generation_start, n);
  ASSERT_GE(task.snapshot_positions.size(), 2u);
  EXPECT_EQ(task.snapshot_positions.back(), n);
  const int32_t last_end = task.snapshot_positions[task.snapshot_positions.size() - 2];
  const std::string before = model->Detokenize(std::span(task.prompt).subspan(0, static_cast<size_t>(last_end)), true);
  EXPECT_TRUE(before.ends_with("What is a radix tree?<|end_of_text|>\n")) << before;
}

// States are kept at the end of every message but the last (the generation start, a few
// tokens later, serves what follows it), at the generation start and at the prompt's end.
TEST_F(RequestBuilderTest, SnapshotPositionsAreMessageEndsAndTheGenerationStart) {
  api::GenerationRequest r;
  r.enable_thinking = false;
  r.messages.push_back({.role = "system", .content = "Be brief."});
  r.messages.push_back({.role = "user", .content = "Hello."});
  r.messages.push_back({.role = "assistant", .content = "Hi."});
  r.messages.push_back({.role = "user", .content = "What is a radix tree?"});
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  const auto& task = std::get<BuildResult>(built).task;
  std::vector<std::string> before;
  for (int32_t p : task.snapshot_positions) {
    before.push_back(model_->Detokenize(std::span(task.prompt).subspan(0, static_cast<size_t>(p)), true));
  }
  ASSERT_EQ(before.size(), 5u);
  EXPECT_TRUE(before[0].ends_with("Be brief.<|im_end|>\n")) << before[0];
  EXPECT_TRUE(before[1].ends_with("Hello.<|im_end|>\n")) << before[1];
  EXPECT_TRUE(before[2].ends_with("Hi.<|im_end|>\n")) << before[2];
  EXPECT_TRUE(before[3].ends_with("radix tree?<|im_end|>\n<|im_start|>assistant\n")) << before[3];
  EXPECT_EQ(task.snapshot_positions[3], task.generation_start);
  EXPECT_EQ(task.snapshot_positions[4], static_cast<int32_t>(task.prompt.size()));
}

// Cache breakpoints land on snapshot positions: a message's end, the last message's at the
// generation start; with tool results merged into one turn, by rendering the messages
// through the breakpoint's. prompt_cache_key and "24h" retention ride along.
TEST_F(RequestBuilderTest, CacheBreakpointsLandOnTheirMessagesEnds) {
  api::GenerationRequest r;
  r.enable_thinking = false;
  r.messages.push_back({.role = "system", .content = "Be brief."});
  r.messages.push_back({.role = "user", .content = "Hello."});
  r.messages.push_back({.role = "assistant", .content = "Hi."});
  r.messages.push_back({.role = "user", .content = "What is a radix tree?"});
  r.cache_hints.breakpoints = {{.message = 0, .ttl_seconds = 3600}, {.message = 2}, {.message = 3}};
  r.cache_hints.key = "conv-1";
  r.cache_hints.extended = true;
  auto built = builder_->Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  const auto& task = std::get<BuildResult>(built).task;
  ASSERT_EQ(task.cache_breakpoints.size(), 3u);
  EXPECT_EQ(task.cache_breakpoints[0].position, task.snapshot_positions[0]);
  EXPECT_EQ(task.cache_breakpoints[0].ttl_seconds, 3600);
  EXPECT_EQ(task.cache_breakpoints[1].position, task.snapshot_positions[2]);
  EXPECT_EQ(task.cache_breakpoints[1].ttl_seconds, 300);
  EXPECT_EQ(task.cache_breakpoints[2].position, task.generation_start);
  EXPECT_EQ(task.cache_conversation, "conv-1");
  EXPECT_EQ(task.newest_hold_seconds, 24 * 3600);

  // Two tool results render as one user turn: the breakpoint on the second still ends
  // where that turn does, and the one on the first, inside it, keeps the turn before.
  api::GenerationRequest t;
  t.enable_thinking = false;
  t.messages.push_back({.role = "user", .content = "List two files."});
  api::Message call{.role = "assistant"};
  call.tool_calls = {{"c1", "ls", "{}"}, {"c2", "ls", "{}"}};
  t.messages.push_back(call);
  t.messages.push_back({.role = "tool", .content = "a.txt", .tool_call_id = "c1", .tool_name = "ls"});
  t.messages.push_back({.role = "tool", .content = "b.txt", .tool_call_id = "c2", .tool_name = "ls"});
  t.cache_hints.breakpoints = {{.message = 2}, {.message = 3}};
  built = builder_->Build(t);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  const auto& tt = std::get<BuildResult>(built).task;
  ASSERT_EQ(tt.cache_breakpoints.size(), 2u);
  const std::string at0 = model_->Detokenize(std::span(tt.prompt).subspan(0, static_cast<size_t>(tt.cache_breakpoints[0].position)), true);
  EXPECT_TRUE(at0.ends_with("<|im_end|>\n")) << at0;
  EXPECT_EQ(at0.find("a.txt"), std::string::npos) << at0;
  EXPECT_EQ(tt.cache_breakpoints[1].position, tt.generation_start);
}

// --stabilize moves a request id to the end of the last message; the next request renders
// that message without it, so the prompt is snapshotted where the moved text starts.
TEST_F(RequestBuilderTest, MovedSpansStartIsASnapshotPosition) {
  auto stabilizer = chat::Stabilizer::Parse({"uuid"}, chat::StabilizeMode::kMoveToEnd);
  ASSERT_TRUE(stabilizer.ok()) << stabilizer.status().ToString();
  RequestBuilder builder(*model_, *tmpl_, 4096, "test", *stabilizer);
  api::GenerationRequest r;
  r.messages.push_back({.role = "system", .content = "Request 3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f. Be brief."});
  r.messages.push_back({.role = "user", .content = "What is a radix tree?"});
  auto built = builder.Build(r);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  const auto& task = std::get<BuildResult>(built).task;
  ASSERT_GT(task.moved_spans_start, 0);
  EXPECT_LT(task.moved_spans_start, task.generation_start);
  EXPECT_TRUE(std::binary_search(task.snapshot_positions.begin(), task.snapshot_positions.end(), task.moved_spans_start));
  const std::string before =
      model_->Detokenize(std::span(task.prompt).subspan(0, static_cast<size_t>(task.moved_spans_start)), true);
  // Up to the last message's own text (its final "?" may share a token with the moved
  // text, so the position may stop just before it).
  EXPECT_TRUE(before.ends_with("What is a radix tree?") || before.ends_with("What is a radix tree")) << before;
  // Without a stabilizer nothing is moved.
  auto plain = builder_->Build(r);
  EXPECT_EQ(std::get<BuildResult>(plain).task.moved_spans_start, -1);
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

// --chat-template-kwargs and --reasoning-format: server-wide defaults that a request's
// own settings override.
TEST(RequestBuilderChatDefaultsTest, ServerDefaultsApplyAndRequestsWin) {
  const engine::Model* model = testing::LoadTestModel("qwen35");
  const engine::ChatTemplate* tmpl = testing::LoadTestTemplate("qwen35");
  ASSERT_TRUE(model != nullptr && tmpl != nullptr);
  ChatDefaults defaults;
  defaults.template_kwargs["enable_thinking"] = "false";
  defaults.reasoning_format = "none";
  RequestBuilder plain(*model, *tmpl, 4096, "test");
  RequestBuilder configured(*model, *tmpl, 4096, "test", {}, defaults);

  api::GenerationRequest r;
  r.messages.push_back({.role = "user", .content = "hi"});
  auto text = [&](const RequestBuilder& b, const api::GenerationRequest& req) {
    auto built = b.Build(req);
    EXPECT_TRUE(std::holds_alternative<BuildResult>(built));
    return std::holds_alternative<BuildResult>(built) ? std::get<BuildResult>(built) : BuildResult{};
  };
  const BuildResult thinking = text(plain, r);
  const BuildResult not_thinking = text(configured, r);
  ASSERT_TRUE(thinking.task.output_format && not_thinking.task.output_format);
  // Qwen3.5's template closes an empty think block when thinking is off.
  EXPECT_EQ(thinking.prompt_text.find("</think>"), std::string::npos) << thinking.prompt_text;
  EXPECT_NE(not_thinking.prompt_text.find("</think>"), std::string::npos) << not_thinking.prompt_text;
  EXPECT_NE(thinking.task.output_format->reasoning_format, not_thinking.task.output_format->reasoning_format);

  r.enable_thinking = true;  // the request's own setting wins
  EXPECT_EQ(text(configured, r).prompt_text, thinking.prompt_text);
}

// -n/--n-predict: the limit of requests that set none; a request's own max_tokens wins,
// and a default beyond the context's room is capped there, not refused.
TEST(RequestBuilderChatDefaultsTest, ServerMaxTokensIsTheDefaultOfRequestsWithoutOne) {
  const engine::Model* model = testing::LoadTestModel("qwen35");
  const engine::ChatTemplate* tmpl = testing::LoadTestTemplate("qwen35");
  ASSERT_TRUE(model != nullptr && tmpl != nullptr);
  constexpr int kSmallCtx = 256;
  int room = 0;  // what the context leaves after the prompt
  auto max_tokens = [&](std::optional<int> server, std::optional<int> request) {
    ChatDefaults defaults;
    defaults.max_tokens = server;
    RequestBuilder b(*model, *tmpl, kSmallCtx, "test", {}, defaults);
    api::GenerationRequest r;
    r.flavor = api::Flavor::kOpenAIResponses;
    r.messages.push_back({.role = "user", .content = "hi"});
    r.max_tokens = request;
    auto built = b.Build(r);
    EXPECT_TRUE(std::holds_alternative<BuildResult>(built));
    if (!std::holds_alternative<BuildResult>(built)) return -1;
    const GenerationTask& task = std::get<BuildResult>(built).task;
    room = kSmallCtx - static_cast<int>(task.prompt.size());
    return task.max_tokens;
  };
  const int unlimited = max_tokens(std::nullopt, std::nullopt);
  ASSERT_GT(room, 40);
  EXPECT_EQ(unlimited, room);  // the whole room
  EXPECT_EQ(max_tokens(16, std::nullopt), 16);
  EXPECT_EQ(max_tokens(16, 5), 5);
  EXPECT_EQ(max_tokens(16, 40), 40);
  EXPECT_EQ(max_tokens(100000, std::nullopt), room);  // capped by the room, not refused
}

}  // namespace
}  // namespace hearth::server
