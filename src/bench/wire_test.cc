#include "bench/wire.h"

#include <gtest/gtest.h>

namespace hearth::bench {
namespace {

ChatRequest AgentTurn() {
  ChatRequest r;
  r.messages = {
      Json{{"role", "system"}, {"content", "Be brief."}},
      Json{{"role", "user"}, {"content", "Fix it."}},
      Json{{"role", "assistant"},
           {"content", "Looking."},
           {"tool_calls", Json::array({Json{{"id", "call_1"}, {"type", "function"},
                                            {"function", {{"name", "read_file"}, {"arguments", R"({"file_path":"a.cc"})"}}}},
                                       Json{{"id", "call_2"}, {"type", "function"},
                                            {"function", {{"name", "grep"}, {"arguments", R"({"pattern":"x"})"}}}}})}},
      Json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "int x;"}},
      Json{{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "a.cc:1"}},
  };
  r.tools = AgentTools();
  r.thinking = false;
  r.max_tokens = 16;
  return r;
}

TEST(WireTest, OpenAIBodyStreamsWithUsage) {
  const Json b = OpenAIBody(AgentTurn(), "m");
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(b["messages"].size(), 5u);
}

TEST(WireTest, SessionKeyNamesTheConversationOnlyWhenSet) {
  ChatRequest r = AgentTurn();
  EXPECT_FALSE(OpenAIBody(r, "m").contains("prompt_cache_key"));
  EXPECT_FALSE(AnthropicBody(r, "m").contains("metadata"));
  r.session_key = "chat-r0-s1-5eed";
  EXPECT_EQ(OpenAIBody(r, "m")["prompt_cache_key"], "chat-r0-s1-5eed");
  EXPECT_EQ(AnthropicBody(r, "m")["metadata"]["user_id"], "chat-r0-s1-5eed");
}

TEST(WireTest, AnthropicBodyGroupsToolResults) {
  const Json b = AnthropicBody(AgentTurn(), "m");
  EXPECT_EQ(b["system"], "Be brief.");
  ASSERT_EQ(b["messages"].size(), 3u);  // user, assistant, one user with both results
  const Json& a = b["messages"][1];
  EXPECT_EQ(a["content"][0]["type"], "text");
  EXPECT_EQ(a["content"][1]["type"], "tool_use");
  EXPECT_EQ(a["content"][1]["input"]["file_path"], "a.cc");
  const Json& results = b["messages"][2]["content"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1]["tool_use_id"], "call_2");
  EXPECT_EQ(b["thinking"]["type"], "disabled");
  EXPECT_EQ(b["tools"][0]["name"], "read_file");
  EXPECT_TRUE(b["tools"][0].contains("input_schema"));
}

TEST(WireTest, AnthropicRoundTripsToTheSameOpenAIConversation) {
  const ChatRequest r = AgentTurn();
  auto rec = ReadRecordedRequest(AnthropicBody(r, "m"), std::nullopt);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->flavor, Flavor::kAnthropic);
  ASSERT_EQ(rec->canonical.messages.size(), r.messages.size());
  for (size_t i = 0; i < r.messages.size(); ++i) {
    EXPECT_EQ(rec->canonical.messages[i]["role"], r.messages[i]["role"]) << i;
    EXPECT_EQ(rec->canonical.messages[i]["content"], r.messages[i]["content"]) << i;
  }
  EXPECT_EQ(rec->canonical.messages[2]["tool_calls"][1]["function"]["arguments"], R"({"pattern":"x"})");
  EXPECT_EQ(rec->canonical.thinking, false);
  EXPECT_EQ(rec->canonical.tools.size(), r.tools.size());
}

TEST(WireTest, RecordedOpenAIBody) {
  auto rec = ReadRecordedRequest(OpenAIBody(AgentTurn(), "m"), std::nullopt);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->flavor, Flavor::kOpenAI);
  EXPECT_EQ(rec->canonical.messages.size(), 5u);
  EXPECT_EQ(rec->canonical.max_tokens, 16);
  EXPECT_FALSE(ReadRecordedRequest(Json::parse(R"({"prompt":"x"})"), std::nullopt).ok());
}

TEST(WireTest, RenderBody) {
  const Json b = RenderBody({Json{{"role", "user"}, {"content", "x"}}}, Json::array(), true, false);
  EXPECT_EQ(b["add_generation_prompt"], false);
  EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_FALSE(b.contains("tools"));
}

}  // namespace
}  // namespace hearth::bench
