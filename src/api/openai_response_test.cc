#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/openai.h"
#include "base/utf8.h"

namespace hearth::api::openai {
namespace {

using nlohmann::json;

json Parsed(const std::string& text) {
  EXPECT_TRUE(IsValidUtf8(text)) << text;
  return json::parse(text);  // a throw fails the test, as it should
}

Completion ToolCallingCompletion() {
  Completion c;
  c.reasoning = "The user wants the weather.";
  c.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"},
                  {"call_2", "get_time", "{}"}};
  c.finish_reason = FinishReason::kToolCalls;
  c.usage = {.prompt_tokens = 1200, .completion_tokens = 34, .cached_tokens = 1024};
  return c;
}

TEST(OpenAIResponseTest, ChatCompletionCarriesToolCallsReasoningAndUsage) {
  json j = Parsed(ChatCompletionJson(ToolCallingCompletion(), "chatcmpl-1", "m", 1700000000));
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& msg = choice["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_TRUE(msg["content"].is_null()) << "a tool-call-only turn has null content";
  EXPECT_EQ(msg["reasoning_content"], "The user wants the weather.");
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(msg["tool_calls"][1]["function"]["name"], "get_time");

  EXPECT_EQ(j["usage"]["prompt_tokens"], 1200);
  EXPECT_EQ(j["usage"]["completion_tokens"], 34);
  EXPECT_EQ(j["usage"]["total_tokens"], 1234);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 1024);
}

TEST(OpenAIResponseTest, PlainAnswerHasStringContentAndNoExtras) {
  Completion c;
  c.content = "Hello.";
  c.finish_reason = FinishReason::kLength;
  json msg = Parsed(ChatCompletionJson(c, "id", "m", 0))["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Hello.");
  EXPECT_FALSE(msg.contains("reasoning_content"));
  EXPECT_FALSE(msg.contains("tool_calls"));

  c.content.clear();
  EXPECT_EQ(Parsed(ChatCompletionJson(c, "id", "m", 0))["choices"][0]["message"]["content"], "")
      << "no text and no tool calls is an empty string, not null";
}

TEST(OpenAIResponseTest, FinishReasonNames) {
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kStopSequence), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kToolCalls), "tool_calls");
  EXPECT_STREQ(FinishReasonName(FinishReason::kCancelled), "stop");
}

TEST(OpenAIResponseTest, StreamChunksInOrder) {
  Delta first;
  first.reasoning = "hmm";
  json c0 = Parsed(ChatChunkJson(first, true, "chatcmpl-9", "m", 5));
  EXPECT_EQ(c0["object"], "chat.completion.chunk");
  EXPECT_EQ(c0["id"], "chatcmpl-9");
  const json& d0 = c0["choices"][0]["delta"];
  EXPECT_EQ(d0["role"], "assistant");
  EXPECT_EQ(d0["content"], "");
  EXPECT_EQ(d0["reasoning_content"], "hmm");
  EXPECT_TRUE(c0["choices"][0]["finish_reason"].is_null());

  Delta text;
  text.content = "Hi";
  json d1 = Parsed(ChatChunkJson(text, false, "chatcmpl-9", "m", 5))["choices"][0]["delta"];
  EXPECT_FALSE(d1.contains("role"));
  EXPECT_EQ(d1["content"], "Hi");
  EXPECT_FALSE(d1.contains("reasoning_content"));

  Delta call_start;
  call_start.tool_calls = {{.index = 0, .id = "call_7", .name = "grep", .arguments = ""}};
  json t0 = Parsed(ChatChunkJson(call_start, false, "x", "m", 5))["choices"][0]["delta"];
  EXPECT_FALSE(t0.contains("content"));
  ASSERT_EQ(t0["tool_calls"].size(), 1u);
  EXPECT_EQ(t0["tool_calls"][0],
            json::parse(R"({"index":0,"id":"call_7","type":"function",
                            "function":{"name":"grep","arguments":""}})"));

  Delta call_args;
  call_args.tool_calls = {{.index = 0, .id = "", .name = "", .arguments = "{\"q\":"},
                          {.index = 1, .id = "call_8", .name = "ls", .arguments = "{}"}};
  json t1 = Parsed(ChatChunkJson(call_args, false, "x", "m", 5))["choices"][0]["delta"];
  EXPECT_EQ(t1["tool_calls"][0], json::parse(R"({"index":0,"function":{"arguments":"{\"q\":"}})"))
      << "continuations carry only the index and argument text";
  EXPECT_EQ(t1["tool_calls"][1]["index"], 1);
  EXPECT_EQ(t1["tool_calls"][1]["id"], "call_8");

  json fin = Parsed(ChatFinishChunkJson(FinishReason::kToolCalls, "x", "m", 5));
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "tool_calls");

  json usage = Parsed(ChatUsageChunkJson({.prompt_tokens = 10, .completion_tokens = 3,
                                          .cached_tokens = 8},
                                         "x", "m", 5));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 13);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

TEST(OpenAIResponseTest, InvalidUtf8FromTheModelIsReplaced) {
  Delta d;
  d.content = "caf\xC3";  // cut inside a character
  std::string chunk = ChatChunkJson(d, false, "x", "m", 0);
  EXPECT_TRUE(IsValidUtf8(chunk));
  EXPECT_EQ(Parsed(chunk)["choices"][0]["delta"]["content"], "caf\xEF\xBF\xBD");

  Completion c;
  c.tool_calls = {{"call_1", "f\xFF", "{\"a\":\"\xFE\"}"}};
  EXPECT_TRUE(IsValidUtf8(ChatCompletionJson(c, "x", "m", 0)));
}

TEST(OpenAIResponseTest, TextCompletionShapes) {
  Completion c;
  c.content = " there was a cat";
  c.finish_reason = FinishReason::kStopSequence;
  c.usage = {.prompt_tokens = 3, .completion_tokens = 5, .cached_tokens = 0};
  json j = Parsed(TextCompletionJson(c, "cmpl-1", "m", 9));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], " there was a cat");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["total_tokens"], 8);

  json chunk = Parsed(TextChunkJson("tok", "cmpl-1", "m", 9));
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "tok");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());

  json fin = Parsed(TextFinishChunkJson(FinishReason::kLength, "cmpl-1", "m", 9));
  EXPECT_EQ(fin["choices"][0]["text"], "");
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  json usage = Parsed(TextUsageChunkJson(c.usage, "cmpl-1", "m", 9));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
}

TEST(OpenAIResponseTest, SseFraming) {
  EXPECT_EQ(SseData(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
  Delta d;
  d.content = "line one\nline two";
  std::string chunk = ChatChunkJson(d, true, "x", "m", 0);
  EXPECT_EQ(chunk.find('\n'), std::string::npos) << "newlines in text stay escaped";
}

TEST(OpenAIResponseTest, ErrorShape) {
  json j = Parsed(ErrorJson({400, "invalid_request_error", "temperature must be ...",
                             "temperature"}));
  EXPECT_EQ(j, json::parse(R"({"error":{"message":"temperature must be ...",
      "type":"invalid_request_error","param":"temperature","code":null}})"));
  json none = Parsed(ErrorJson({503, "overloaded_error", "busy", ""}));
  EXPECT_TRUE(none["error"]["param"].is_null());
  EXPECT_EQ(none["error"]["type"], "overloaded_error");
}

TEST(OpenAIResponseTest, ModelsList) {
  json j = Parsed(ModelsJson({{"qwen3.5-9b", 1700000000, "hearth"}, {"tiny", 1, "me"}}));
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0], json::parse(R"({"id":"qwen3.5-9b","object":"model",
      "created":1700000000,"owned_by":"hearth"})"));
  EXPECT_EQ(j["data"][1]["owned_by"], "me");
  EXPECT_EQ(Parsed(ModelsJson({}))["data"], json::array());
}

}  // namespace
}  // namespace hearth::api::openai
