#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/responses.h"

namespace hearth::api::responses {
namespace {

using json = nlohmann::json;

ResponseInfo Info() {
  ResponseInfo info;
  info.id = "resp_1";
  info.model = "m";
  info.created_at = 1700000000;
  info.instructions = "Be brief.";
  info.tools = {{"shell", "Run", R"({"type":"object"})"}};
  info.max_output_tokens = 64;
  return info;
}

Usage SomeUsage() {
  Usage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 80;
  u.completion_tokens = 7;
  u.cache = CacheReport{.reused_tokens = 80, .prefilled_tokens = 20};
  return u;
}

TEST(ResponsesResponseTest, WholeResponseListsItemsInOrderWithUsage) {
  Completion c;
  c.reasoning = "think";
  c.content = "Running it.";
  c.tool_calls = {{"call_0", "shell", R"({"cmd":"ls"})"}};
  c.finish_reason = FinishReason::kToolCalls;
  c.usage = SomeUsage();
  const json r = json::parse(ResponseJson(Info(), c));
  EXPECT_EQ(r["id"], "resp_1");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["max_output_tokens"], 64);
  EXPECT_EQ(r["tools"][0]["type"], "function");
  EXPECT_EQ(r["tools"][0]["name"], "shell");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "think");
  EXPECT_EQ(r["output"][1]["type"], "message");
  EXPECT_EQ(r["output"][1]["role"], "assistant");
  EXPECT_EQ(r["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Running it.");
  EXPECT_EQ(r["output"][2]["type"], "function_call");
  EXPECT_EQ(r["output"][2]["call_id"], "call_0");
  EXPECT_EQ(r["output"][2]["arguments"], R"({"cmd":"ls"})");
  EXPECT_TRUE(r["output"][2]["id"].get<std::string>().starts_with("fc_"));
  EXPECT_EQ(r["usage"]["input_tokens"], 100);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 80);
  EXPECT_EQ(r["usage"]["output_tokens"], 7);
  EXPECT_EQ(r["usage"]["total_tokens"], 107);
  EXPECT_EQ(r["usage"]["hearth_cache"]["prefilled_tokens"], 20);
}

TEST(ResponsesResponseTest, LengthLimitIsIncomplete) {
  Completion c;
  c.content = "abc";
  c.finish_reason = FinishReason::kLength;
  const json r = json::parse(ResponseJson(Info(), c));
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
}

// The events of an SSE text, in order.
std::vector<json> Events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  std::string name;
  while (at < sse.size()) {
    size_t end = sse.find('\n', at);
    const std::string line = sse.substr(at, end - at);
    at = end + 1;
    if (line.starts_with("event: ")) name = line.substr(7);
    if (line.starts_with("data: ")) {
      json j = json::parse(line.substr(6));
      EXPECT_EQ(j["type"], name) << "the event name is the data's type";
      out.push_back(std::move(j));
    }
  }
  return out;
}

TEST(ResponsesResponseTest, StreamOpensAndClosesItemsAsOutputChanges) {
  StreamEncoder enc;
  std::string sse = enc.Start(Info());
  sse += enc.Push({.reasoning = "hm"});
  sse += enc.Push({.content = "Hel"});
  sse += enc.Push({.content = "lo"});
  sse += enc.Push({.tool_calls = {{.index = 0, .id = "call_0", .name = "shell", .arguments = "{\"a\""}}});
  sse += enc.Push({.tool_calls = {{.index = 0, .arguments = ":1}"}}});
  Completion c;
  c.finish_reason = FinishReason::kToolCalls;
  c.usage = SomeUsage();
  sse += enc.Finish(c);
  const std::vector<json> ev = Events(sse);
  std::vector<std::string> types;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["sequence_number"], static_cast<int>(i));
    types.push_back(ev[i]["type"]);
  }
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(ev[0]["response"]["status"], "in_progress");
  EXPECT_EQ(ev[12]["text"], "Hello");
  EXPECT_EQ(ev[10]["output_index"], 1);
  EXPECT_EQ(ev[15]["item"]["call_id"], "call_0");
  EXPECT_EQ(ev[18]["arguments"], "{\"a\":1}");
  const json& done = ev.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][1]["id"], ev[8]["item"]["id"]) << "an item keeps its id from added to completed";
  EXPECT_EQ(done["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 80);
  EXPECT_EQ(json::parse(enc.response_json()), done) << "what GET /v1/responses/{id} answers later";
}

TEST(ResponsesResponseTest, NotFoundAndDeletedInOpenAIsShapes) {
  const ApiError e = ResponseNotFound("resp_x");
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.message, "Response with id 'resp_x' not found.");
  EXPECT_EQ(json::parse(DeletedJson("resp_x")), (json{{"id", "resp_x"}, {"object", "response"}, {"deleted", true}}));
}

TEST(ResponsesResponseTest, StreamErrorSendsErrorThenFailed) {
  StreamEncoder enc;
  std::string sse = enc.Start(Info());
  sse += enc.Error({503, "overloaded_error", "busy", ""});
  const std::vector<json> ev = Events(sse);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2]["type"], "error");
  EXPECT_EQ(ev[2]["message"], "busy");
  EXPECT_EQ(ev[3]["type"], "response.failed");
  EXPECT_EQ(ev[3]["response"]["status"], "failed");
  EXPECT_EQ(ev[3]["response"]["error"]["message"], "busy");
}

}  // namespace
}  // namespace hearth::api::responses
