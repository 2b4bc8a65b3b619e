#include <gtest/gtest.h>

#include <string>

#include "api/anthropic.h"

namespace hearth::api::anthropic {
namespace {

GenerationRequest ParseOk(std::string_view body) {
  ParseResult<GenerationRequest> r = ParseMessagesRequest(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : GenerationRequest{};
}

// The shape of a Claude Code request in the middle of a task: system blocks with
// cache_control, client tools beside Anthropic-hosted ones, an assistant turn with
// signed thinking and two tool calls, and the user turn that answers both and adds a
// reminder.
constexpr const char* kClaudeCodeTurn = R"({
  "model": "claude-sonnet-4-5-20250929",
  "max_tokens": 32000,
  "system": [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
     "cache_control": {"type": "ephemeral"}},
    {"type": "text",
     "text": "You are an interactive CLI tool that helps users with software engineering tasks.",
     "cache_control": {"type": "ephemeral"}}
  ],
  "messages": [
    {"role": "user", "content": [
      {"type": "text",
       "text": "<system-reminder>\nAs you answer, use TodoWrite.\n</system-reminder>"},
      {"type": "text", "text": "why does make fail?", "cache_control": {"type": "ephemeral"}}
    ]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "I should run make and read the Makefile.",
       "signature": "EqQBCkYIBxgCKkDx..."},
      {"type": "redacted_thinking", "data": "opaque"},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_01A", "name": "Bash",
       "input": {"command": "make 2>&1 | tail -5", "description": "Run make"}},
      {"type": "tool_use", "id": "toolu_01B", "name": "Read",
       "input": {"file_path": "/src/Makefile"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_01A",
       "content": "main.c:3: error: expected ';'", "is_error": true},
      {"type": "tool_result", "tool_use_id": "toolu_01B",
       "content": [{"type": "text", "text": "all: main"}, {"type": "text", "text": "\tcc main.c"}]},
      {"type": "text", "text": "<system-reminder>todo list is empty</system-reminder>",
       "cache_control": {"type": "ephemeral"}}
    ]}
  ],
  "tools": [
    {"name": "Bash", "description": "Executes a bash command",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"},
       "description": {"type": "string"}}, "required": ["command"],
       "additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"}},
    {"name": "Read", "description": "Reads a file",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "bash_20250124", "name": "bash"}
  ],
  "metadata": {"user_id": "user_abc_account_def_session_123"},
  "thinking": {"type": "enabled", "budget_tokens": 31999},
  "temperature": 1,
  "stream": true,
  "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
  "service_tier": "auto",
  "container": null
})";

TEST(AnthropicRequestTest, ClaudeCodeTurnMapsInOrder) {
  GenerationRequest req = ParseOk(kClaudeCodeTurn);
  EXPECT_EQ(req.flavor, Flavor::kAnthropic);
  EXPECT_EQ(req.model, "claude-sonnet-4-5-20250929");
  EXPECT_EQ(req.max_tokens, 32000);
  EXPECT_TRUE(req.stream);
  EXPECT_EQ(req.enable_thinking, true);
  EXPECT_FLOAT_EQ(req.sampling.temperature.value_or(-1), 1.0f);

  ASSERT_EQ(req.messages.size(), 6u);
  EXPECT_EQ(req.messages[0].role, "system");
  EXPECT_EQ(req.messages[0].content,
            "You are Claude Code, Anthropic's official CLI for Claude.\n"
            "You are an interactive CLI tool that helps users with software engineering tasks.");

  EXPECT_EQ(req.messages[1].role, "user");
  EXPECT_EQ(req.messages[1].content,
            "<system-reminder>\nAs you answer, use TodoWrite.\n</system-reminder>\n"
            "why does make fail?");

  const Message& assistant = req.messages[2];
  EXPECT_EQ(assistant.role, "assistant");
  EXPECT_EQ(assistant.content, "Let me look.");
  EXPECT_EQ(assistant.reasoning_content, "I should run make and read the Makefile.");
  ASSERT_EQ(assistant.tool_calls.size(), 2u);
  EXPECT_EQ(assistant.tool_calls[0].id, "toolu_01A");
  EXPECT_EQ(assistant.tool_calls[0].name, "Bash");
  EXPECT_EQ(assistant.tool_calls[0].arguments,
            R"({"command":"make 2>&1 | tail -5","description":"Run make"})")
      << "input keeps the client's key order";
  EXPECT_EQ(assistant.tool_calls[1].arguments, R"({"file_path":"/src/Makefile"})");

  EXPECT_EQ(req.messages[3].role, "tool");
  EXPECT_EQ(req.messages[3].tool_call_id, "toolu_01A");
  EXPECT_EQ(req.messages[3].tool_name, "Bash");
  EXPECT_EQ(req.messages[3].content, "main.c:3: error: expected ';'");
  EXPECT_EQ(req.messages[4].role, "tool");
  EXPECT_EQ(req.messages[4].tool_call_id, "toolu_01B");
  EXPECT_EQ(req.messages[4].tool_name, "Read");
  EXPECT_EQ(req.messages[4].content, "all: main\n\tcc main.c");
  EXPECT_EQ(req.messages[5].role, "user");
  EXPECT_EQ(req.messages[5].content, "<system-reminder>todo list is empty</system-reminder>");

  ASSERT_EQ(req.tools.size(), 2u) << "hosted tools are dropped";
  EXPECT_EQ(req.tools[0].name, "Bash");
  EXPECT_EQ(req.tools[0].description, "Executes a bash command");
  EXPECT_EQ(req.tools[0].parameters.rfind(R"({"type":"object","properties":{"command")", 0), 0u)
      << req.tools[0].parameters;
  EXPECT_EQ(req.tools[1].name, "Read");
  EXPECT_EQ(req.tool_choice, "auto");
}

TEST(AnthropicRequestTest, TextBetweenToolResultsSplitsTheTurn) {
  GenerationRequest req = ParseOk(R"({"max_tokens":10,"messages":[
    {"role":"user","content":"go"},
    {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},
                                   {"type":"tool_use","id":"b","name":"g","input":{"z":0,"y":1}}]},
    {"role":"user","content":[{"type":"text","text":"first"},
                              {"type":"tool_result","tool_use_id":"a"},
                              {"type":"text","text":"between"},
                              {"type":"text","text":"again"},
                              {"type":"tool_result","tool_use_id":"b","content":[]}]}]})");
  ASSERT_EQ(req.messages.size(), 6u);
  EXPECT_EQ(req.messages[1].tool_calls[1].arguments, R"({"z":0,"y":1})");
  std::vector<std::string> roles;
  for (const Message& m : req.messages) roles.push_back(m.role);
  EXPECT_EQ(roles, (std::vector<std::string>{"user", "assistant", "user", "tool", "user", "tool"}));
  EXPECT_EQ(req.messages[2].content, "first");
  EXPECT_EQ(req.messages[3].tool_name, "f");
  EXPECT_EQ(req.messages[3].content, "") << "a result with no content is empty";
  EXPECT_EQ(req.messages[4].content, "between\nagain");
  EXPECT_EQ(req.messages[5].tool_name, "g");
}

TEST(AnthropicRequestTest, PlainStringsAndEmptyTurns) {
  GenerationRequest req = ParseOk(R"({"model":"m","max_tokens":1,"system":"Be brief.",
    "messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},
                {"role":"user","content":[]}],"stop_sequences":["\n\nHuman:"],"top_k":5,
    "top_p":0.9,"metadata":{"user_id":"u"}})");
  ASSERT_EQ(req.messages.size(), 4u);
  EXPECT_EQ(req.messages[0].role, "system");
  EXPECT_EQ(req.messages[0].content, "Be brief.");
  EXPECT_EQ(req.messages[2].content, "hello");
  EXPECT_EQ(req.messages[3].role, "user") << "an empty user turn still takes its place";
  EXPECT_EQ(req.stop, std::vector<std::string>{"\n\nHuman:"});
  EXPECT_EQ(req.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(req.sampling.top_p.value_or(-1), 0.9f);
  EXPECT_FALSE(req.enable_thinking.has_value());
  EXPECT_FALSE(req.stream);

  GenerationRequest no_system =
      ParseOk(R"({"max_tokens":1,"system":[],"messages":[{"role":"user","content":"x"}]})");
  ASSERT_EQ(no_system.messages.size(), 1u) << "an empty system adds no message";
}

// Claude Code sends mid-conversation system turns as messages with role "system".
TEST(AnthropicRequestTest, SystemTurnsInMessagesKeepTheirPlace) {
  GenerationRequest req = ParseOk(R"({"model":"m","max_tokens":1,"system":"top",
    "messages":[{"role":"user","content":[{"type":"text","text":"say hi"}]},
                {"role":"system","content":[{"type":"text","text":"# Environment",
                                             "cache_control":{"type":"ephemeral"}},
                                            {"type":"text","text":"cwd: /w"}]},
                {"role":"assistant","content":"hi"},
                {"role":"system","content":"later"}]})");
  std::vector<std::string> roles;
  for (const Message& m : req.messages) roles.push_back(m.role);
  EXPECT_EQ(roles, (std::vector<std::string>{"system", "user", "system", "assistant", "system"}));
  EXPECT_EQ(req.messages[2].content, "# Environment\ncwd: /w");
  EXPECT_EQ(req.messages[4].content, "later");
}

TEST(AnthropicRequestTest, ToolChoiceAndThinkingForms) {
  auto parse = [](std::string_view extra) {
    std::string body = R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],
        "tools":[{"name":"Edit","input_schema":{"type":"object"}},
                 {"type":"custom","name":"Glob","input_schema":{"type":"object"}}])";
    body += extra;
    body += "}";
    return ParseOk(body);
  };
  EXPECT_EQ(parse(R"(,"tool_choice":{"type":"auto"})").tool_choice, "auto");
  EXPECT_EQ(parse(R"(,"tool_choice":{"type":"any"})").tool_choice, "required");
  EXPECT_EQ(parse(R"(,"tool_choice":{"type":"none"})").tool_choice, "none");
  EXPECT_EQ(parse(R"(,"tool_choice":{"type":"tool","name":"Glob"})").tool_choice, "Glob");
  EXPECT_EQ(parse("").tools.size(), 2u) << "type \"custom\" is a client tool";
  EXPECT_TRUE(parse("").parallel_tool_calls);
  EXPECT_FALSE(parse(R"(,"tool_choice":{"type":"auto","disable_parallel_tool_use":true})")
                   .parallel_tool_calls);

  EXPECT_EQ(parse(R"(,"thinking":{"type":"enabled","budget_tokens":2048})").enable_thinking, true);
  EXPECT_EQ(parse(R"(,"thinking":{"type":"disabled"})").enable_thinking, false);
  EXPECT_EQ(parse(R"(,"thinking":{"type":"adaptive"})").enable_thinking, std::nullopt);
}

// Breakpoints name the message whose end they keep: system and tools blocks the system
// turn, a user block the last message its turn split into; ttl 5m unless "1h".
TEST(AnthropicRequestTest, CacheControlBecomesBreakpointsAtMessageEnds) {
  const GenerationRequest req = ParseOk(R"({"max_tokens": 10,
    "tools": [{"name": "f", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"},
                                   {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]},
      {"role": "assistant", "content": [{"type": "text", "text": "x", "cache_control": null}]}]})");
  ASSERT_EQ(req.messages.size(), 6u);  // system, user, assistant, tool, user, assistant
  ASSERT_EQ(req.cache_hints.breakpoints.size(), 3u);
  EXPECT_EQ(req.cache_hints.breakpoints[0].message, 0);
  EXPECT_EQ(req.cache_hints.breakpoints[0].ttl_seconds, 3600);
  EXPECT_EQ(req.cache_hints.breakpoints[1].message, 0);
  EXPECT_EQ(req.cache_hints.breakpoints[1].ttl_seconds, 300);
  EXPECT_EQ(req.cache_hints.breakpoints[2].message, 4);
  EXPECT_EQ(req.cache_hints.breakpoints[2].ttl_seconds, 300);
  EXPECT_TRUE(ParseOk(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})").cache_hints.breakpoints.empty());
}

TEST(AnthropicRequestTest, CountTokensDoesNotNeedMaxTokens) {
  const char* body = R"({"model":"m","messages":[{"role":"user","content":"count me"}],
                         "tools":[{"name":"t","input_schema":{"type":"object"}}]})";
  ParseResult<GenerationRequest> counted = ParseCountTokensRequest(body);
  ASSERT_TRUE(counted.ok()) << counted.error().message;
  EXPECT_FALSE(counted->max_tokens.has_value());
  EXPECT_EQ(counted->tools.size(), 1u);

  ParseResult<GenerationRequest> message = ParseMessagesRequest(body);
  ASSERT_FALSE(message.ok());
  EXPECT_EQ(message.error().param, "max_tokens");
  EXPECT_EQ(message.error().message, "max_tokens is required");
}

struct BadRequest {
  std::string body;
  const char* param;
  const char* message;
};

class AnthropicErrorTest : public testing::TestWithParam<BadRequest> {};

TEST_P(AnthropicErrorTest, IsA400NamingTheField) {
  const BadRequest& c = GetParam();
  ParseResult<GenerationRequest> r = ParseMessagesRequest(c.body);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  EXPECT_EQ(r.error().param, c.param);
  EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
}

// A valid prefix for bodies that break one field.
#define OK_START R"({"max_tokens":100,)"
#define HI R"("messages":[{"role":"user","content":"hi"}])"

INSTANTIATE_TEST_SUITE_P(
    Cases, AnthropicErrorTest,
    testing::Values(
        BadRequest{"{\"max_tokens\":1,", "", "not valid JSON: parse error at line 1"},
        BadRequest{"\"hi\"", "", "must be a JSON object, not string"},
        BadRequest{OK_START R"("messages":[]})", "messages", "must not be empty"},
        BadRequest{OK_START R"("messages":[{"role":"developer","content":"x"}]})",
                   "messages[0].role", "must be \"user\", \"assistant\" or \"system\""},
        BadRequest{OK_START R"("messages":[{"role":"system","content":[{"type":"image"}]}]})",
                   "messages[0].content[0]", "accepts text only"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":3}]})", "messages[0].content",
                   "must be a string or an array of content blocks"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"text","text":"see"},
                   {"type":"image","source":{"type":"base64","media_type":"image/png",
                   "data":"AA"}}]}]})",
                   "messages[0].content[1]", "this model accepts text only"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"tool_result",
                   "tool_use_id":"t","content":[{"type":"image","source":{}}]}]}]})",
                   "messages[0].content[0].content[0]", "this model accepts text only"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"document"}]}]})",
                   "messages[0].content[0]", "this model accepts text only"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"tool_result"}]}]})",
                   "messages[0].content[0].tool_use_id", "is required"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"text":"x"}]}]})",
                   "messages[0].content[0].type", "is required"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"thinking",
                   "thinking":""}]}]})",
                   "messages[0].content[0].type", "not a supported block in a user message"},
        BadRequest{OK_START R"("messages":[{"role":"assistant","content":[{"type":"tool_use",
                   "id":"t","name":"f","input":"{}"}]}]})",
                   "messages[0].content[0].input", "must be an object"},
        BadRequest{OK_START R"("messages":[{"role":"assistant","content":[{"type":"tool_use",
                   "id":"t"}]}]})",
                   "messages[0].content[0].name", "is required"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"tool_result",
                   "tool_use_id":"t","is_error":"yes"}]}]})",
                   "messages[0].content[0].is_error", "must be a boolean"},
        BadRequest{OK_START R"("system":[{"type":"image"}],)" HI "}", "system[0]",
                   "this model accepts text only"},
        BadRequest{OK_START R"("system":7,)" HI "}", "system", "must be a string or an array"},
        BadRequest{R"({"max_tokens":0,)" HI "}", "max_tokens", "integer >= 1"},
        BadRequest{OK_START R"("temperature":1.5,)" HI "}", "temperature", "from 0 to 1"},
        BadRequest{OK_START R"("top_k":-1,)" HI "}", "top_k", "integer >= 0"},
        BadRequest{OK_START R"("stop_sequences":[null],)" HI "}", "stop_sequences[0]",
                   "must be a string"},
        BadRequest{OK_START R"("stop_sequences":["ok",")" + std::string(1025, 'x') + "\"]," HI "}",
                   "stop_sequences[1]", "stop_sequences[1] must be at most 1024 bytes long"},
        BadRequest{OK_START R"("stop_sequences":["","","","","","","","","","","","","","","","",
                   ""],)" HI "}", "stop_sequences", "must hold at most 16 strings"},
        BadRequest{OK_START R"("tools":[{"description":"no name"}],)" HI "}", "tools[0].name",
                   "is required"},
        BadRequest{OK_START R"("tools":[{"name":"a","input_schema":[]}],)" HI "}",
                   "tools[0].input_schema", "must be a JSON schema object"},
        BadRequest{OK_START R"("tool_choice":"auto",)" HI "}", "tool_choice",
                   "must be an object"},
        BadRequest{OK_START R"("tool_choice":{"type":"any"},)" HI "}", "tool_choice", "no tools"},
        BadRequest{OK_START R"("tools":[{"name":"a"}],
                   "tool_choice":{"type":"tool","name":"b"},)" HI "}",
                   "tool_choice.name", "\"b\" is not one of the tools"},
        BadRequest{OK_START R"("tool_choice":{"type":"sometimes"},)" HI "}", "tool_choice.type",
                   "must be"},
        BadRequest{OK_START R"("thinking":{"type":"on"},)" HI "}", "thinking.type", "must be"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"text","text":"x",
                   "cache_control":{"type":"ephemeral","ttl":"10m"}}]}]})",
                   "messages[0].content[0].cache_control.ttl", "must be \"5m\" or \"1h\""},
        BadRequest{OK_START R"("system":[{"type":"text","text":"s","cache_control":{"type":"persistent"}}],)" HI "}",
                   "system[0].cache_control.type", "must be \"ephemeral\""},
        BadRequest{OK_START R"("tools":[{"name":"a","cache_control":"ephemeral"}],)" HI "}",
                   "tools[0].cache_control", "must be an object"},
        BadRequest{OK_START R"("tools":[{"name":"a","cache_control":{"ttl":"5m"}}],)" HI "}",
                   "tools[0].cache_control.type", "is required"},
        BadRequest{OK_START R"("messages":[{"role":"user","content":[{"type":"text","text":"x",
                   "cache_control":{"type":"ephemeral","ttl":3600}}]}]})",
                   "messages[0].content[0].cache_control.ttl", "must be a string"},
        BadRequest{OK_START R"("system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},
                   {"type":"text","text":"b","cache_control":{"type":"ephemeral"}},
                   {"type":"text","text":"c","cache_control":{"type":"ephemeral"}},
                   {"type":"text","text":"d","cache_control":{"type":"ephemeral"}},
                   {"type":"text","text":"e","cache_control":{"type":"ephemeral"}}],)" HI "}",
                   "system[4].cache_control", "at most 4 blocks"},
        BadRequest{OK_START R"("thinking":{"type":"enabled","budget_tokens":"lots"},)" HI "}",
                   "thinking.budget_tokens", "must be an integer"}));

#undef OK_START
#undef HI

TEST(AnthropicRequestTest, EveryTruncationIsAnErrorNotAThrow) {
  const std::string body = kClaudeCodeTurn;
  for (size_t n = 0; n + 1 < body.size(); ++n) {
    ParseResult<GenerationRequest> r = ParseMessagesRequest(body.substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes";
  }
}

}  // namespace
}  // namespace hearth::api::anthropic
