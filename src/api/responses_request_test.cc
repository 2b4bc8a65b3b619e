#include <gtest/gtest.h>

#include <string>

#include "api/responses.h"

namespace hearth::api::responses {
namespace {

ResponsesRequest ParseOk(std::string_view body) {
  ParseResult<ResponsesRequest> r = ParseResponsesRequest(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : ResponsesRequest{};
}

ApiError ParseError(std::string_view body) {
  ParseResult<ResponsesRequest> r = ParseResponsesRequest(body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? ApiError{} : r.error();
}

// As Codex CLI sends a turn after a tool call: instructions, a developer message, the
// user's text parts, the model's reasoning, its message and call, and the call's output.
constexpr const char* kAgentTurn = R"({
  "model": "qwen3.5",
  "instructions": "You are a coding agent.",
  "input": [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"},
                                                    {"type": "input_text", "text": "the build"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "short"}],
     "content": [{"type": "reasoning_text", "text": "Look first."}], "encrypted_content": null},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "shell",
     "arguments": "{\"cmd\":  [\"ls\"]}"},
    {"type": "function_call_output", "call_id": "call_a", "output": "Makefile"},
    {"role": "user", "content": "and now?"}
  ],
  "tools": [{"type": "function", "name": "shell", "description": "Run", "strict": false,
             "parameters": {"type": "object", "properties": {"cmd": {"type": "array"}}}}],
  "tool_choice": "auto",
  "parallel_tool_calls": false,
  "reasoning": {"effort": "medium", "summary": "auto"},
  "store": false,
  "stream": true,
  "include": ["reasoning.encrypted_content"],
  "prompt_cache_key": "session-1",
  "max_output_tokens": 300,
  "temperature": 0.5
})";

TEST(ResponsesRequestTest, AgentTurnMapsEveryItem) {
  ResponsesRequest r = ParseOk(kAgentTurn);
  const GenerationRequest& g = r.generation;
  EXPECT_EQ(g.flavor, Flavor::kOpenAIResponses);
  EXPECT_EQ(r.instructions, "You are a coding agent.");
  EXPECT_FALSE(r.store);
  ASSERT_EQ(g.messages.size(), 5u);
  EXPECT_EQ(g.messages[0].role, "system") << "developer maps to system";
  EXPECT_EQ(g.messages[1].content, "fix\nthe build");
  const Message& a = g.messages[2];
  EXPECT_EQ(a.role, "assistant") << "reasoning, message and call are one turn";
  EXPECT_EQ(a.reasoning_content, "Look first.") << "reasoning_text wins over the summary";
  EXPECT_EQ(a.content, "Listing.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "call_a");
  EXPECT_EQ(a.tool_calls[0].name, "shell");
  EXPECT_EQ(a.tool_calls[0].arguments, "{\"cmd\":  [\"ls\"]}") << "arguments verbatim";
  EXPECT_EQ(g.messages[3].role, "tool");
  EXPECT_EQ(g.messages[3].tool_call_id, "call_a");
  EXPECT_EQ(g.messages[3].content, "Makefile");
  EXPECT_EQ(g.messages[4].role, "user");
  ASSERT_EQ(g.tools.size(), 1u);
  EXPECT_EQ(g.tools[0].parameters, R"({"type":"object","properties":{"cmd":{"type":"array"}}})");
  EXPECT_FALSE(g.parallel_tool_calls);
  EXPECT_EQ(g.enable_thinking, true);
  EXPECT_TRUE(g.stream);
  EXPECT_EQ(g.max_tokens, 300);
  EXPECT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_EQ(g.cache_hints.key, "session-1");

  // The conversation puts instructions first and names the tool the output answers.
  const std::vector<Message> all = Conversation(r, {});
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].role, "system");
  EXPECT_EQ(all[0].content, "You are a coding agent.");
  EXPECT_EQ(all[4].tool_name, "shell");
}

// As Codex sends its tools: functions, a namespace grouping more of them, and tools the
// API's host would run, which a local model cannot.
TEST(ResponsesRequestTest, NamespacedFunctionsAreToolsAndHostedToolsAreDropped) {
  ResponsesRequest r = ParseOk(R"({"input": "x", "tools": [
      {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
      {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents", "tools": [
        {"type": "function", "name": "close_agent", "strict": false, "parameters": {"type": "object"}}]},
      {"type": "web_search", "external_web_access": false},
      {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]})");
  ASSERT_EQ(r.generation.tools.size(), 2u);
  EXPECT_EQ(r.generation.tools[0].name, "exec_command");
  EXPECT_EQ(r.generation.tools[1].name, "close_agent");
  EXPECT_EQ(r.generation.tools[1].parameters, R"({"type":"object"})");
}

TEST(ResponsesRequestTest, StringInputIsOneUserMessage) {
  ResponsesRequest r = ParseOk(R"({"model": "m", "input": "hello"})");
  ASSERT_EQ(r.generation.messages.size(), 1u);
  EXPECT_EQ(r.generation.messages[0].role, "user");
  EXPECT_EQ(r.generation.messages[0].content, "hello");
  EXPECT_TRUE(r.store) << "store defaults to true";
  EXPECT_FALSE(r.instructions);
  EXPECT_FALSE(r.previous_response_id);
}

// llama-server's extension: `stop` as in chat, a string or strings.
TEST(ResponsesRequestTest, StopStringsAsLlamaServerTakesThem) {
  EXPECT_EQ(ParseOk(R"({"input": "x", "stop": ["\n", "e"]})").generation.stop, (std::vector<std::string>{"\n", "e"}));
  EXPECT_EQ(ParseOk(R"({"input": "x", "stop": "END"})").generation.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(ParseOk(R"({"input": "x"})").generation.stop.empty());
}

// previous_response_id: the stored conversation goes between the instructions and the
// new input, and a tool output in the new input finds its call there.
TEST(ResponsesRequestTest, HistoryComesBetweenInstructionsAndInput) {
  ResponsesRequest first = ParseOk(R"({"input": "list files", "instructions": "Be brief."})");
  Completion reply;
  reply.reasoning = "ls it";
  reply.tool_calls = {{"call_0", "shell", "{}"}};
  const std::vector<Message> stored = StoredConversation(first, {}, reply);
  ASSERT_EQ(stored.size(), 2u) << "instructions are not carried over";
  EXPECT_EQ(stored[0].content, "list files");
  EXPECT_EQ(stored[1].role, "assistant");
  EXPECT_EQ(stored[1].reasoning_content, "ls it");

  ResponsesRequest next = ParseOk(R"({"previous_response_id": "resp_1", "instructions": "Be brief.",
      "input": [{"type": "function_call_output", "call_id": "call_0", "output": [{"type": "input_text", "text": "a.c"}]}]})");
  EXPECT_EQ(next.previous_response_id, "resp_1");
  const std::vector<Message> all = Conversation(next, stored);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].role, "system");
  EXPECT_EQ(all[1].content, "list files");
  EXPECT_EQ(all[2].tool_calls.size(), 1u);
  EXPECT_EQ(all[3].role, "tool");
  EXPECT_EQ(all[3].content, "a.c");
  EXPECT_EQ(all[3].tool_name, "shell");
}

TEST(ResponsesRequestTest, BadInputNamesTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"model": "m"})", "input"},
      {R"({"input": 3})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})", "input[0].content[0]"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})", "input[0].content[0]"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input[0].output"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type"},
      {R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input[0].type"},
      {R"({"input": "x", "tools": [{"name": "f"}]})", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "namespace", "name": "ns"}]})", "tools[0].tools"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "tools[0].name"},
      {R"({"input": "x", "tool_choice": {"type": "function", "name": "nope"}})", "tool_choice.name"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "temperature": "hot"})", "temperature"},
      {R"({"input": "x", "previous_response_id": 7})", "previous_response_id"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.type"},
      {R"({"input": "x", "stop": [1]})", "stop[0]"},
  };
  for (const Case& c : cases) {
    const ApiError e = ParseError(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

}  // namespace
}  // namespace hearth::api::responses
