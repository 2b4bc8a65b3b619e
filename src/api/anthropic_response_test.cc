#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/anthropic.h"
#include "base/utf8.h"

namespace hearth::api::anthropic {
namespace {

using nlohmann::json;

struct SseEvent {
  std::string name;
  json data;
};

// Splits SSE text into events the way a client does, checking the framing as it goes.
std::vector<SseEvent> ParseSse(const std::string& text) {
  EXPECT_TRUE(IsValidUtf8(text));
  std::vector<SseEvent> events;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated event: " << text.substr(pos);
      break;
    }
    std::string block = text.substr(pos, end - pos);
    pos = end + 2;
    size_t newline = block.find('\n');
    if (block.rfind("event: ", 0) != 0 || newline == std::string::npos ||
        block.compare(newline + 1, 6, "data: ") != 0) {
      ADD_FAILURE() << "malformed event: " << block;
      continue;
    }
    SseEvent e{block.substr(7, newline - 7), json::parse(block.substr(newline + 7))};
    EXPECT_EQ(e.data["type"], e.name) << "event name and data type agree";
    events.push_back(std::move(e));
  }
  return events;
}

// Plays the events back as a client would, failing on anything out of order, and
// returns the content blocks it assembled.
json Replay(const std::vector<SseEvent>& events) {
  json blocks = json::array();
  std::vector<std::string> partial_json;
  bool open = false;
  bool signed_block = false;
  EXPECT_FALSE(events.empty());
  if (events.empty()) return blocks;
  EXPECT_EQ(events.front().name, "message_start");
  EXPECT_EQ(events.back().name, "message_stop");
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const SseEvent& e = events[i];
    const json& d = e.data;
    if (e.name == "ping") continue;
    if (e.name == "content_block_start") {
      EXPECT_FALSE(open) << "block " << d["index"] << " opened while another is open";
      EXPECT_EQ(d["index"], blocks.size()) << "indexes count up from 0";
      blocks.push_back(d["content_block"]);
      partial_json.emplace_back();
      open = true;
      signed_block = false;
    } else if (e.name == "content_block_delta") {
      EXPECT_TRUE(open);
      EXPECT_EQ(d["index"], blocks.size() - 1) << "deltas go to the open block";
      json& block = blocks.back();
      const std::string kind = d["delta"]["type"];
      if (kind == "text_delta") {
        EXPECT_EQ(block["type"], "text");
        block["text"] = block["text"].get<std::string>() + d["delta"]["text"].get<std::string>();
      } else if (kind == "thinking_delta") {
        EXPECT_EQ(block["type"], "thinking");
        EXPECT_FALSE(signed_block) << "no thinking after the signature";
        block["thinking"] =
            block["thinking"].get<std::string>() + d["delta"]["thinking"].get<std::string>();
      } else if (kind == "signature_delta") {
        EXPECT_EQ(block["type"], "thinking");
        signed_block = true;
      } else if (kind == "input_json_delta") {
        EXPECT_EQ(block["type"], "tool_use");
        partial_json.back() += d["delta"]["partial_json"].get<std::string>();
      } else {
        ADD_FAILURE() << "unknown delta " << kind;
      }
    } else if (e.name == "content_block_stop") {
      EXPECT_TRUE(open);
      EXPECT_EQ(d["index"], blocks.size() - 1);
      json& block = blocks.back();
      if (block["type"] == "thinking") {
        EXPECT_TRUE(signed_block) << "signature before stop";
      }
      if (block["type"] == "tool_use" && !partial_json.back().empty()) {
        block["input"] = json::parse(partial_json.back());
      }
      open = false;
    } else if (e.name == "message_delta") {
      EXPECT_FALSE(open) << "message_delta with a block still open";
      EXPECT_EQ(i, events.size() - 2) << "message_delta comes right before message_stop";
    } else {
      ADD_FAILURE() << "unexpected event " << e.name;
    }
  }
  return blocks;
}

Delta Reasoning(std::string s) {
  Delta d;
  d.reasoning = std::move(s);
  return d;
}
Delta Text(std::string s) {
  Delta d;
  d.content = std::move(s);
  return d;
}
Delta Call(int index, std::string id, std::string name, std::string args) {
  Delta d;
  d.tool_calls = {{index, std::move(id), std::move(name), std::move(args)}};
  return d;
}

TEST(AnthropicStreamTest, ThinkingTextAndTwoToolCallsRoundTrip) {
  StreamEncoder enc;
  std::string sse = enc.Start("msg_1", "qwen", {.prompt_tokens = 900, .cached_tokens = 512});
  sse += enc.Ping();
  for (const Delta& d : {Reasoning("Need "), Reasoning("to look."), Text("Checking"),
                         Text(" now."), Call(0, "toolu_a", "Bash", ""), Call(0, "", "", "{\"comm"),
                         Call(0, "", "", "and\":\"ls\"}"), Call(1, "toolu_b", "Read", "{}")}) {
    sse += enc.Push(d);
  }
  Completion done;
  done.finish_reason = FinishReason::kToolCalls;
  done.usage = {.prompt_tokens = 900, .completion_tokens = 40, .cached_tokens = 512};
  sse += enc.Finish(done);

  std::vector<SseEvent> events = ParseSse(sse);
  json blocks = Replay(events);
  EXPECT_EQ(blocks, json::parse(R"([
    {"type":"thinking","thinking":"Need to look.","signature":""},
    {"type":"text","text":"Checking now."},
    {"type":"tool_use","id":"toolu_a","name":"Bash","input":{"command":"ls"}},
    {"type":"tool_use","id":"toolu_b","name":"Read","input":{}}])"));

  const json& start = events.front().data["message"];
  EXPECT_EQ(start["id"], "msg_1");
  EXPECT_EQ(start["model"], "qwen");
  EXPECT_EQ(start["role"], "assistant");
  EXPECT_EQ(start["content"], json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], 388) << "900 prompt tokens - 512 read from cache";
  EXPECT_EQ(start["usage"]["cache_read_input_tokens"], 512);

  const json& delta = events[events.size() - 2].data;
  EXPECT_EQ(delta["delta"]["stop_reason"], "tool_use");
  EXPECT_TRUE(delta["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(delta["usage"]["output_tokens"], 40);
  EXPECT_EQ(delta["usage"]["input_tokens"], 388);
  EXPECT_EQ(delta["usage"]["cache_creation_input_tokens"], 0);
}

TEST(AnthropicStreamTest, KindChangesOpenNewBlocks) {
  StreamEncoder enc;
  std::string sse = enc.Start("msg_2", "m", {});
  Delta both;  // one delta may carry reasoning and text; reasoning goes first
  both.reasoning = "a";
  both.content = "b";
  sse += enc.Push(both);
  sse += enc.Push(Reasoning("c"));
  sse += enc.Push(Delta{});  // nothing new: no events
  sse += enc.Push(Text("d"));
  Completion done;
  done.finish_reason = FinishReason::kStopSequence;
  done.stop_sequence = "</answer>";
  sse += enc.Finish(done);
  std::vector<SseEvent> events = ParseSse(sse);
  json blocks = Replay(events);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0]["thinking"], "a");
  EXPECT_EQ(blocks[1]["text"], "b");
  EXPECT_EQ(blocks[2]["thinking"], "c");
  EXPECT_EQ(blocks[3]["text"], "d");
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_sequence"], "</answer>");
}

TEST(AnthropicStreamTest, EmptyAnswerAndMissingToolIds) {
  StreamEncoder enc;
  std::string sse = enc.Start("msg_3", "m", {});
  Completion done;
  done.finish_reason = FinishReason::kLength;
  sse += enc.Finish(done);
  std::vector<SseEvent> events = ParseSse(sse);
  EXPECT_EQ(Replay(events), json::array());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].data["delta"]["stop_reason"], "max_tokens");

  StreamEncoder tools;
  std::string t = tools.Start("msg_4", "m", {});
  t += tools.Push(Call(3, "", "f", "{}"));
  t += tools.Finish(done);
  json blocks = Replay(ParseSse(t));
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0]["id"].get<std::string>().rfind("toolu_", 0), 0u) << "an id is made up";
}

TEST(AnthropicStreamTest, ErrorAndPingEvents) {
  StreamEncoder enc;
  std::vector<SseEvent> events =
      ParseSse(enc.Ping() + enc.Error({529, "overloaded_error", "Overloaded", ""}));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, json::parse(R"({"type":"ping"})"));
  EXPECT_EQ(events[1].data, json::parse(
      R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
}

TEST(AnthropicStreamTest, InvalidUtf8IsReplaced) {
  StreamEncoder enc;
  // One statement per call: the operands of + are evaluated in no fixed order.
  std::string sse = enc.Start("msg_5", "m", {});
  sse += enc.Push(Text("bad \xF0\x9F"));
  sse += enc.Finish(Completion{});
  json blocks = Replay(ParseSse(sse));
  EXPECT_EQ(blocks[0]["text"], "bad \xEF\xBF\xBD");
}

TEST(AnthropicMessageTest, ContentOrderStopReasonAndUsage) {
  Completion c;
  c.reasoning = "think";
  c.content = "Running it.";
  c.tool_calls = {{"toolu_x", "Bash", R"({"command": "ls", "cwd": "/"})"},
                  {"", "Broken", "{not json"}};
  c.finish_reason = FinishReason::kToolCalls;
  c.usage = {.prompt_tokens = 5000, .completion_tokens = 77, .cached_tokens = 4096};
  std::string text = MessageJson(c, "msg_9", "qwen");
  json j = json::parse(text);
  EXPECT_EQ(j["id"], "msg_9");
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "qwen");
  ASSERT_EQ(j["content"].size(), 4u);
  EXPECT_EQ(j["content"][0],
            json::parse(R"({"type":"thinking","thinking":"think","signature":""})"));
  EXPECT_EQ(j["content"][1], json::parse(R"({"type":"text","text":"Running it."})"));
  EXPECT_EQ(j["content"][2]["input"], json::parse(R"({"command":"ls","cwd":"/"})"));
  EXPECT_NE(text.find(R"("input":{"command":"ls","cwd":"/"})"), std::string::npos)
      << "input keeps the model's key order";
  EXPECT_EQ(j["content"][3]["input"], json::object()) << "unparseable arguments become {}";
  EXPECT_EQ(j["content"][3]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"], json::parse(R"({"input_tokens":904,"cache_creation_input_tokens":0,
                                        "cache_read_input_tokens":4096,"output_tokens":77})"));
}

TEST(AnthropicMessageTest, StopReasonNamesAndSmallReplies) {
  EXPECT_STREQ(StopReasonName(FinishReason::kStop), "end_turn");
  EXPECT_STREQ(StopReasonName(FinishReason::kLength), "max_tokens");
  EXPECT_STREQ(StopReasonName(FinishReason::kToolCalls), "tool_use");
  EXPECT_STREQ(StopReasonName(FinishReason::kStopSequence), "stop_sequence");
  EXPECT_STREQ(StopReasonName(FinishReason::kCancelled), "end_turn");

  Completion plain;
  plain.finish_reason = FinishReason::kStopSequence;
  plain.stop_sequence = "STOP";
  json j = json::parse(MessageJson(plain, "msg", "m"));
  EXPECT_EQ(j["content"], json::array());
  EXPECT_EQ(j["stop_sequence"], "STOP");

  EXPECT_EQ(json::parse(CountTokensJson(1234)), json::parse(R"({"input_tokens":1234})"));
  EXPECT_EQ(json::parse(ErrorJson({400, "invalid_request_error", "max_tokens is required",
                                   "max_tokens"})),
            json::parse(R"({"type":"error","error":{"type":"invalid_request_error",
                                                   "message":"max_tokens is required"}})"));
}

}  // namespace
}  // namespace hearth::api::anthropic
