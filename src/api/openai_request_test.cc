#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "api/json_fields.h"
#include "api/openai.h"

namespace hearth::api::openai {
namespace {

GenerationRequest ParseOk(std::string_view body) {
  ParseResult<GenerationRequest> r = ParseChatCompletionRequest(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : GenerationRequest{};
}

// As the current OpenAI Python/Node SDKs and agent clients send a multi-turn tool
// conversation: developer role, content parts, an assistant turn with null content and
// tool_calls, and the tool's answer.
constexpr const char* kAgentTurn = R"({
  "model": "qwen3.5-9b",
  "messages": [
    {"role": "developer", "content": "You are a coding agent."},
    {"role": "user", "name": "alice", "content": [
      {"type": "text", "text": "<task>fix the build</task>"},
      {"type": "text", "text": "<environment_details>cwd: /src</environment_details>"}
    ]},
    {"role": "assistant", "content": null, "reasoning_content": "Look at the files first.",
     "tool_calls": [{"id": "call_abc", "type": "function",
                     "function": {"name": "list_files",
                                  "arguments": "{\"path\": \".\",  \"recursive\":true}"}}]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "Makefile\nmain.c"}
  ],
  "tools": [{"type": "function", "function": {"name": "list_files", "description": "List files",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                            "required": ["path"]}, "strict": false}}],
  "tool_choice": "auto",
  "parallel_tool_calls": false,
  "stream": true,
  "stream_options": {"include_usage": true},
  "max_completion_tokens": 4096,
  "temperature": 0.6,
  "top_p": 0.95,
  "stop": "</done>",
  "user": "u-1",
  "store": false,
  "metadata": {"session": "x"},
  "prompt_cache_key": "abc"
})";

TEST(OpenAIRequestTest, AgentTurnMapsEveryMessage) {
  GenerationRequest req = ParseOk(kAgentTurn);
  EXPECT_EQ(req.flavor, Flavor::kOpenAIChat);
  EXPECT_EQ(req.model, "qwen3.5-9b");
  ASSERT_EQ(req.messages.size(), 4u);

  EXPECT_EQ(req.messages[0].role, "system") << "developer maps to system";
  EXPECT_EQ(req.messages[0].content, "You are a coding agent.");

  EXPECT_EQ(req.messages[1].role, "user");
  EXPECT_EQ(req.messages[1].content,
            "<task>fix the build</task>\n<environment_details>cwd: /src</environment_details>");

  const Message& assistant = req.messages[2];
  EXPECT_EQ(assistant.role, "assistant");
  EXPECT_EQ(assistant.content, "");
  EXPECT_EQ(assistant.reasoning_content, "Look at the files first.");
  ASSERT_EQ(assistant.tool_calls.size(), 1u);
  EXPECT_EQ(assistant.tool_calls[0].id, "call_abc");
  EXPECT_EQ(assistant.tool_calls[0].name, "list_files");
  EXPECT_EQ(assistant.tool_calls[0].arguments, R"({"path": ".",  "recursive":true})")
      << "argument text is kept byte for byte";

  const Message& tool = req.messages[3];
  EXPECT_EQ(tool.role, "tool");
  EXPECT_EQ(tool.tool_call_id, "call_abc");
  EXPECT_EQ(tool.tool_name, "list_files") << "named after the call it answers";
  EXPECT_EQ(tool.content, "Makefile\nmain.c");

  ASSERT_EQ(req.tools.size(), 1u);
  EXPECT_EQ(req.tools[0].name, "list_files");
  EXPECT_EQ(req.tools[0].description, "List files");
  EXPECT_EQ(req.tools[0].parameters,
            R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})")
      << "schema keys stay in the client's order";
  EXPECT_EQ(req.tool_choice, "auto");
  EXPECT_FALSE(req.parallel_tool_calls);
  EXPECT_TRUE(req.stream);
  EXPECT_TRUE(req.include_usage);
  EXPECT_EQ(req.max_tokens, 4096);
  EXPECT_FLOAT_EQ(req.sampling.temperature.value_or(-1), 0.6f);
  EXPECT_FLOAT_EQ(req.sampling.top_p.value_or(-1), 0.95f);
  EXPECT_EQ(req.stop, std::vector<std::string>{"</done>"});
  EXPECT_FALSE(req.enable_thinking.has_value());
}

TEST(OpenAIRequestTest, DefaultsWhenFieldsAreAbsentOrNull) {
  GenerationRequest req = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],"temperature":null,"tools":null,
          "stop":null,"max_tokens":null,"stream_options":null})");
  EXPECT_EQ(req.model, "");
  EXPECT_FALSE(req.stream);
  EXPECT_FALSE(req.include_usage);
  EXPECT_FALSE(req.max_tokens.has_value());
  EXPECT_FALSE(req.sampling.temperature.has_value());
  EXPECT_TRUE(req.stop.empty());
  EXPECT_TRUE(req.tools.empty());
  EXPECT_EQ(req.tool_choice, "auto");
  EXPECT_TRUE(req.parallel_tool_calls);
  EXPECT_TRUE(req.cache_salt.empty());
}

TEST(OpenAIRequestTest, PromptCacheKeyAndRetention) {
  auto r = ParseChatCompletionRequest(
      R"({"messages":[{"role":"user","content":"hi"}],"prompt_cache_key":"conv-7","prompt_cache_retention":"24h"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().cache_hints.key, "conv-7");
  EXPECT_TRUE(r.value().cache_hints.extended);
  r = ParseChatCompletionRequest(R"({"messages":[{"role":"user","content":"hi"}],"prompt_cache_retention":"in_memory"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r.value().cache_hints.extended);
  EXPECT_TRUE(r.value().cache_hints.key.empty());
  r = ParseCompletionRequest(R"({"prompt":"hi","prompt_cache_key":"k","prompt_cache_retention":null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().cache_hints.key, "k");
}

TEST(OpenAIRequestTest, SamplingFieldsAndAliases) {
  GenerationRequest req = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],"top_k":40,"min_p":0.05,"seed":42,
          "presence_penalty":-0.5,"frequency_penalty":1.5,"repetition_penalty":1.1,
          "max_tokens":1024.0,"max_completion_tokens":null,"stop":["a","","b"],
          "cache_salt":"tenant-7","n":1,"logprobs":false,"response_format":{"type":"text"}})");
  const Sampling& s = req.sampling;
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p.value_or(-1), 0.05f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_FLOAT_EQ(s.presence_penalty.value_or(0), -0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty.value_or(0), 1.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty.value_or(0), 1.1f);
  EXPECT_EQ(req.max_tokens, 1024) << "an integral float is an integer";
  EXPECT_EQ(req.stop, (std::vector<std::string>{"a", "b"})) << "empty stops dropped";
  EXPECT_EQ(req.cache_salt, "tenant-7");

  GenerationRequest llama = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],"repeat_penalty":1.3,"top_k":-1,
          "seed":-1,"max_tokens":10,"max_completion_tokens":20})");
  EXPECT_FLOAT_EQ(llama.sampling.repetition_penalty.value_or(0), 1.3f);
  EXPECT_FALSE(llama.sampling.top_k.has_value()) << "-1 disables top_k";
  EXPECT_FALSE(llama.sampling.seed.has_value()) << "-1 asks for a random seed";
  EXPECT_EQ(llama.max_tokens, 20) << "max_completion_tokens wins";

  GenerationRequest big = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],"seed":4294967297})");
  EXPECT_EQ(big.sampling.seed, 0u) << "2^32 + 1 folds to 1 ^ 1";

  GenerationRequest huge = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1099511627776})");
  EXPECT_EQ(huge.max_tokens, std::numeric_limits<int>::max()) << "2^40 saturates";
}

// Stop lists up to the documented bounds are accepted whole (the 400s are in the error cases).
TEST(OpenAIRequestTest, StopListsUpToTheLimitsAreAccepted) {
  std::string stops;
  for (size_t i = 0; i < kMaxStopStrings; ++i) {
    stops += (i ? ",\"" : "\"") + std::string(kMaxStopStringBytes - 1, 'x') + static_cast<char>('a' + i) + "\"";
  }
  GenerationRequest req = ParseOk(R"({"messages":[{"role":"user","content":"hi"}],"stop":[)" + stops + "]}");
  ASSERT_EQ(req.stop.size(), kMaxStopStrings);
  EXPECT_EQ(req.stop.back().size(), kMaxStopStringBytes);
}

TEST(OpenAIRequestTest, ThinkingControls) {
  auto thinking = [](std::string_view extra) {
    std::string body = R"({"messages":[{"role":"user","content":"hi"}])";
    body += extra;
    body += "}";
    return ParseOk(body).enable_thinking;
  };
  EXPECT_EQ(thinking(R"(,"reasoning_effort":"none")"), false);
  EXPECT_EQ(thinking(R"(,"reasoning_effort":"high")"), true);
  EXPECT_EQ(thinking(R"(,"chat_template_kwargs":{"enable_thinking":false})"), false);
  EXPECT_EQ(thinking(R"(,"reasoning_effort":"low",
                        "chat_template_kwargs":{"enable_thinking":false})"),
            false)
      << "the explicit template switch wins";
  EXPECT_EQ(thinking(""), std::nullopt);

  GenerationRequest req = ParseOk(
      R"({"messages":[{"role":"user","content":"hi"}],
          "chat_template_kwargs":{"enable_thinking":true,"reasoning_budget":512,"tz":"UTC",
                                  "opts":{"b":1,"a":[true,null]}}})");
  EXPECT_EQ(req.enable_thinking, true);
  EXPECT_EQ(req.template_kwargs.count("enable_thinking"), 0u);
  EXPECT_EQ(req.template_kwargs.at("reasoning_budget"), "512");
  EXPECT_EQ(req.template_kwargs.at("tz"), "\"UTC\"");
  EXPECT_EQ(req.template_kwargs.at("opts"), R"({"b":1,"a":[true,null]})");
}

TEST(OpenAIRequestTest, ToolChoiceForms) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"grep"}}])";
  auto choice = [&](std::string_view tc) {
    return ParseOk(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                   R"(,"tool_choice":)" + std::string(tc) + "}");
  };
  EXPECT_EQ(choice(R"("none")").tool_choice, "none");
  EXPECT_EQ(choice(R"("required")").tool_choice, "required");
  GenerationRequest named = choice(R"({"type":"function","function":{"name":"grep"}})");
  EXPECT_EQ(named.tool_choice, "grep");
  ASSERT_EQ(named.tools.size(), 1u);
  EXPECT_EQ(named.tools[0].parameters, R"({"type":"object","properties":{}})")
      << "a tool without parameters still gets an object schema";
}

TEST(OpenAIRequestTest, ArgumentsSentAsObjectAreSerializedInOrder) {
  GenerationRequest req = ParseOk(R"({"messages":[
      {"role":"user","content":"x"},
      {"role":"assistant","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":{"z":1,"a":"two"}}}]},
      {"role":"tool","tool_call_id":"c1","name":"f_override",
       "content":[{"type":"text","text":"ok"}]}]})");
  ASSERT_EQ(req.messages.size(), 3u);
  EXPECT_EQ(req.messages[1].tool_calls[0].arguments, R"({"z":1,"a":"two"})");
  EXPECT_EQ(req.messages[1].content, "") << "missing content on a tool-calling turn is fine";
  EXPECT_EQ(req.messages[2].tool_name, "f_override") << "an explicit name wins";
  EXPECT_EQ(req.messages[2].content, "ok");
}

struct BadRequest {
  std::string body;
  const char* param;    // expected ApiError::param
  const char* message;  // a substring the message must hold
};

class OpenAIChatErrorTest : public testing::TestWithParam<BadRequest> {};

TEST_P(OpenAIChatErrorTest, IsA400NamingTheField) {
  const BadRequest& c = GetParam();
  ParseResult<GenerationRequest> r = ParseChatCompletionRequest(c.body);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  EXPECT_EQ(r.error().param, c.param);
  EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
}

#define USER R"("messages":[{"role":"user","content":"hi"}])"

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenAIChatErrorTest,
    testing::Values(
        BadRequest{"{" USER R"(,"prompt_cache_retention":"1h"})", "prompt_cache_retention",
                   "must be \"in_memory\" or \"24h\""},
        BadRequest{"{" USER R"(,"prompt_cache_retention":24})", "prompt_cache_retention", "must be a string"},
        BadRequest{"{" USER R"(,"prompt_cache_key":{"id":1}})", "prompt_cache_key", "must be a string"},
        BadRequest{R"({"messages": [)", "", "not valid JSON: parse error at line 1, column 15"},
        BadRequest{R"([{"role":"user"}])", "", "must be a JSON object, not array"},
        BadRequest{"{\"messages\":[{\"role\":\"user\",\"content\":\"\xC3\x28\"}]}", "",
                   "not valid JSON"},
        BadRequest{(std::string(R"({"messages":[{"role":"user","content":)") +
                    std::string(200, '[') + std::string(200, ']') + "}]}"),
                   "", "nests deeper than 128 levels"},
        BadRequest{R"({"model":"m"})", "messages", "messages is required"},
        BadRequest{R"({"messages":{}})", "messages", "must be an array"},
        BadRequest{R"({"messages":[]})", "messages", "must not be empty"},
        BadRequest{R"({"messages":["hi"]})", "messages[0]", "must be an object"},
        BadRequest{R"({"messages":[{"content":"hi"}]})", "messages[0].role", "is required"},
        BadRequest{R"({"messages":[{"role":"robot","content":"hi"}]})", "messages[0].role",
                   "(got \"robot\")"},
        BadRequest{R"({"messages":[{"role":"user"}]})", "messages[0].content", "is required"},
        BadRequest{R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                   {"role":"user","content":5}]})",
                   "messages[2].content",
                   "messages[2].content must be a string or an array of content parts"},
        BadRequest{R"({"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},
                   {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]})",
                   "messages[0].content[1]", "this model accepts text only"},
        BadRequest{R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})",
                   "messages[0].content[0]", "this model accepts text only"},
        BadRequest{R"({"messages":[{"role":"user","content":[{"type":"hologram"}]}]})",
                   "messages[0].content[0].type", "not a supported content part type"},
        BadRequest{R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
                   "messages[0].content[0].text", "is required"},
        BadRequest{R"({"messages":[{"role":"tool","tool_call_id":"c"}]})", "messages[0].content",
                   "is required"},
        BadRequest{R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{}}]}]})",
                   "messages[0].tool_calls[0].function.name", "is required"},
        BadRequest{R"({"messages":[{"role":"assistant","tool_calls":{}}]})",
                   "messages[0].tool_calls", "must be an array"},
        BadRequest{"{" USER R"(,"temperature":2.5})", "temperature", "from 0 to 2"},
        BadRequest{"{" USER R"(,"temperature":"hot"})", "temperature", "must be a number"},
        BadRequest{"{" USER R"(,"top_p":0})", "top_p", "greater than 0 and at most 1"},
        BadRequest{"{" USER R"(,"max_tokens":0})", "max_tokens", "integer >= 1"},
        BadRequest{"{" USER R"(,"max_completion_tokens":1.5})", "max_completion_tokens",
                   "integer >= 1"},
        BadRequest{"{" USER R"(,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13",
                   "14","15","16","17"]})", "stop", "stop must hold at most 16 strings"},
        BadRequest{"{" USER R"(,"stop":")" + std::string(1025, 'x') + "\"}", "stop",
                   "stop must be at most 1024 bytes long"},
        BadRequest{"{" USER R"(,"n":2})", "n", "n must be 1"},
        BadRequest{"{" USER R"(,"logprobs":true})", "logprobs", "not supported"},
        BadRequest{"{" USER R"(,"response_format":{"type":"json_schema","json_schema":{}}})",
                   "response_format.type", "\"json_schema\" is not supported yet"},
        BadRequest{"{" USER R"(,"response_format":{"type":"json_object"}})",
                   "response_format.type", "not supported yet"},
        BadRequest{"{" USER R"(,"stop":["a",1]})", "stop[1]", "must be a string"},
        BadRequest{"{" USER R"(,"stream":"yes"})", "stream", "must be a boolean"},
        BadRequest{"{" USER R"(,"stream_options":{"include_usage":1}})",
                   "stream_options.include_usage", "must be a boolean"},
        BadRequest{"{" USER R"(,"tools":[{"type":"custom","custom":{"name":"x"}}]})",
                   "tools[0].type", "must be \"function\""},
        BadRequest{"{" USER R"(,"tools":[{"type":"function","function":{"name":"a"}},
                   {"type":"function","function":{"name":"a"}}]})",
                   "tools[1].function.name", "already declared by tools[0]"},
        BadRequest{"{" USER R"(,"tools":[{"type":"function",
                   "function":{"name":"a","parameters":"{}"}}]})",
                   "tools[0].function.parameters", "must be a JSON schema object"},
        BadRequest{"{" USER R"(,"tool_choice":"required"})", "tool_choice", "no tools"},
        BadRequest{"{" USER R"(,"tool_choice":"sometimes"})", "tool_choice", "must be"},
        BadRequest{"{" USER R"(,"tools":[{"type":"function","function":{"name":"a"}}],
                   "tool_choice":{"type":"function","function":{"name":"b"}}})",
                   "tool_choice.function.name", "\"b\" is not one of the tools"},
        BadRequest{"{" USER R"(,"chat_template_kwargs":{"enable_thinking":"true"}})",
                   "chat_template_kwargs.enable_thinking", "must be a boolean"},
        BadRequest{"{" USER R"(,"chat_template_kwargs":[]})", "chat_template_kwargs",
                   "must be an object"},
        BadRequest{"{" USER R"(,"reasoning_effort":2})", "reasoning_effort",
                   "must be a string"}));

#undef USER

// Arguments are a JSON string (OpenAI) or an object; a number, array or boolean is no
// call's arguments and was once rendered into the prompt as it stood.
TEST(OpenAIRequestTest, ArgumentsOfAnyOtherTypeAreRefused) {
  for (const char* args : {"7", "[1,2]", "true"}) {
    const std::string body = std::string(R"({"messages":[{"role":"user","content":"x"},
        {"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":)") +
                             args + "}}]}]}";
    ParseResult<GenerationRequest> r = ParseChatCompletionRequest(body);
    ASSERT_FALSE(r.ok()) << args;
    EXPECT_EQ(r.error().http_status, 400);
    EXPECT_EQ(r.error().param, "messages[1].tool_calls[0].function.arguments") << r.error().message;
  }
}

TEST(OpenAICompletionRequestTest, PromptForms) {
  ParseResult<GenerationRequest> r = ParseCompletionRequest(
      R"({"model":"m","prompt":"Once upon","max_tokens":16,"stream":true,"echo":false,
          "stop":["\n"],"temperature":0,"logprobs":null,"best_of":1,"suffix":""})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->flavor, Flavor::kOpenAICompletion);
  EXPECT_EQ(r->prompt, "Once upon");
  EXPECT_TRUE(r->messages.empty());
  EXPECT_EQ(r->max_tokens, 16);
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n"});
  EXPECT_FLOAT_EQ(r->sampling.temperature.value_or(-1), 0.0f);

  ParseResult<GenerationRequest> one = ParseCompletionRequest(R"({"prompt":["only one"]})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompt, "only one");
}

TEST(OpenAICompletionRequestTest, RefusesWhatItCannotDo) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {
           Case{R"({"max_tokens":5})", "prompt"},
           Case{R"({"prompt":["a","b"]})", "prompt"},
           Case{R"({"prompt":[1,2,3]})", "prompt"},
           Case{R"({"prompt":[[1,2]]})", "prompt"},
           Case{R"({"prompt":7})", "prompt"},
           Case{R"({"prompt":"x","echo":true})", "echo"},
           Case{R"({"prompt":"x","suffix":"}"})", "suffix"},
           Case{R"({"prompt":"x","best_of":3})", "best_of"},
           Case{R"({"prompt":"x","logprobs":5})", "logprobs"},
           Case{R"({"prompt":"x","n":4})", "n"},
       }) {
    ParseResult<GenerationRequest> r = ParseCompletionRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().http_status, 400) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body << ": " << r.error().message;
  }
}

TEST(OpenAIRequestTest, EveryTruncationIsAnErrorNotAThrow) {
  const std::string body = kAgentTurn;
  for (size_t n = 0; n + 1 < body.size(); ++n) {
    ParseResult<GenerationRequest> r = ParseChatCompletionRequest(body.substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes";
  }
}

}  // namespace
}  // namespace hearth::api::openai
