#include "server/response_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hearth::server {
namespace {

using json = nlohmann::json;

struct SseEvent {
  std::string event;  // "" when the frame has no event: line
  std::string data;
};

// Splits server-sent events; comment frames (": ...") are dropped.
std::vector<SseEvent> ParseSse(const std::string& text) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated frame: " << text.substr(pos);
    if (end == std::string::npos) break;
    const std::string frame = text.substr(pos, end - pos);
    pos = end + 2;
    SseEvent ev;
    size_t line_start = 0;
    bool comment_only = true;
    while (line_start <= frame.size()) {
      size_t nl = frame.find('\n', line_start);
      const std::string line = frame.substr(line_start, nl == std::string::npos ? std::string::npos : nl - line_start);
      if (line.starts_with("event: ")) {
        ev.event = line.substr(7);
        comment_only = false;
      } else if (line.starts_with("data: ")) {
        ev.data = line.substr(6);
        comment_only = false;
      }
      if (nl == std::string::npos) break;
      line_start = nl + 1;
    }
    if (!comment_only) out.push_back(ev);
  }
  return out;
}

api::Completion Done(api::FinishReason reason) {
  api::Completion c;
  c.finish_reason = reason;
  c.usage.prompt_tokens = 10;
  c.usage.completion_tokens = 3;
  c.usage.cached_tokens = 4;
  return c;
}

TEST(ResponseWriterTest, StatusCodesMapToApiErrors) {
  EXPECT_EQ(ToApiError(InvalidArgument("x")).http_status, 400);
  EXPECT_EQ(ToApiError(OutOfRange("x")).http_status, 400);
  EXPECT_EQ(ToApiError(OutOfRange("x")).type, "invalid_request_error");
  EXPECT_EQ(ToApiError(ResourceExhausted("x")).http_status, 503);
  EXPECT_EQ(ToApiError(Unavailable("x")).http_status, 503);
  EXPECT_EQ(ToApiError(Unavailable("x")).type, "overloaded_error");
  EXPECT_EQ(ToApiError(Internal("boom")).http_status, 500);
  EXPECT_EQ(ToApiError(Internal("boom")).message, "boom");
}

TEST(ResponseWriterTest, OpenAIChatStreamWithUsage) {
  auto w = MakeResponseWriter(api::Flavor::kOpenAIChat, "m", /*include_usage=*/true);
  std::string out = w->Begin({});
  out += w->Delta({.content = "Hel"});
  out += w->KeepAlive();
  out += w->Delta({.content = "lo"});
  out += w->End(Done(api::FinishReason::kLength));
  auto events = ParseSse(out);
  ASSERT_EQ(events.size(), 6u) << out;
  EXPECT_EQ(events.back().data, "[DONE]");
  std::string text;
  std::string id;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json j = json::parse(events[i].data);
    if (id.empty()) id = j["id"];
    EXPECT_EQ(j["id"], id) << "one id for the whole stream";
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (i == 0) {
      EXPECT_EQ(j["choices"][0]["delta"]["role"], "assistant");
    }
    if (j["choices"].size() == 1 && j["choices"][0]["delta"].contains("content")) {
      text += j["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "Hello");
  json finish = json::parse(events[3].data);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  json usage = json::parse(events[4].data);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(ResponseWriterTest, OpenAIStreamWithoutUsageHasNoUsageChunk) {
  auto w = MakeResponseWriter(api::Flavor::kOpenAIChat, "m", /*include_usage=*/false);
  auto events = ParseSse(w->Begin({}) + w->End(Done(api::FinishReason::kStop)));
  ASSERT_EQ(events.size(), 3u);
  const json finish = json::parse(events[1].data);
  EXPECT_TRUE(!finish.contains("usage") || finish["usage"].is_null());
  EXPECT_EQ(events[2].data, "[DONE]");
}

TEST(ResponseWriterTest, OpenAIStreamErrorEndsTheStream) {
  auto w = MakeResponseWriter(api::Flavor::kOpenAICompletion, "m", false);
  auto events = ParseSse(w->Begin({}) + w->Delta({.content = "a"}) + w->Fail({500, "api_error", "decode failed", ""}));
  ASSERT_EQ(events.size(), 3u);
  json err = json::parse(events[1].data);
  EXPECT_EQ(err["error"]["message"], "decode failed");
  EXPECT_EQ(err["error"]["type"], "api_error");
  EXPECT_EQ(events[2].data, "[DONE]");
}

TEST(ResponseWriterTest, TextCompletionSkipsEmptyDeltas) {
  auto w = MakeResponseWriter(api::Flavor::kOpenAICompletion, "m", false);
  EXPECT_EQ(w->Begin({}), "");
  EXPECT_EQ(w->Delta({.reasoning = "not for text completions"}), "");
  auto events = ParseSse(w->Delta({.content = "x"}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0].data)["choices"][0]["text"], "x");
}

TEST(ResponseWriterTest, AnthropicStreamEventOrder) {
  auto w = MakeResponseWriter(api::Flavor::kAnthropic, "m", false);
  api::Usage start;
  start.prompt_tokens = 10;
  std::string out = w->Begin(start);
  out += w->Delta({.reasoning = "hmm"});
  out += w->KeepAlive();
  out += w->Delta({.content = "Hi"});
  out += w->End(Done(api::FinishReason::kStop));
  std::vector<std::string> types;
  for (const auto& e : ParseSse(out)) {
    types.push_back(e.event);
    EXPECT_EQ(json::parse(e.data)["type"], e.event) << "event name and data type agree";
  }
  EXPECT_EQ(types, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "ping", "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta", "content_block_stop",
                                             "message_delta", "message_stop"}));
}

TEST(ResponseWriterTest, WholeResponsesAndErrorBodies) {
  auto chat = MakeResponseWriter(api::Flavor::kOpenAIChat, "m", false);
  api::Completion c = Done(api::FinishReason::kStop);
  c.content = "Hello";
  json j = json::parse(chat->Whole(c));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  json e = json::parse(chat->ErrorBody({400, "invalid_request_error", "bad", "messages"}));
  EXPECT_EQ(e["error"]["param"], "messages");

  auto msg = MakeResponseWriter(api::Flavor::kAnthropic, "m", false);
  json m = json::parse(msg->Whole(c));
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["content"][0]["text"], "Hello");
  EXPECT_EQ(m["usage"]["input_tokens"], 6) << "prompt minus cached";
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 4);
  json ae = json::parse(msg->ErrorBody({401, "authentication_error", "no", ""}));
  EXPECT_EQ(ae["type"], "error");
  EXPECT_EQ(ae["error"]["type"], "authentication_error");
}

}  // namespace
}  // namespace hearth::server
