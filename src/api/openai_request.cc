// Request parsing for the OpenAI API. See openai.h for the mapping rules.
#include <cstdint>
#include <limits>
#include <map>

#include "api/json_fields.h"
#include "api/openai.h"

namespace hearth::api::openai {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Schema for a function declared without `parameters`: templates expect an object.
constexpr const char* kEmptyParameters = R"({"type":"object","properties":{}})";

MaybeError ReadSampling(const Json& body, Sampling* s) {
  if (auto e = ReadFloat(body, "temperature", {0, 2}, &s->temperature)) return e;
  if (auto e = ReadFloat(body, "top_p", {0, 1, true}, &s->top_p)) return e;
  if (auto e = ReadFloat(body, "min_p", {0, 1}, &s->min_p)) return e;
  if (auto e = ReadFloat(body, "presence_penalty", {-2, 2}, &s->presence_penalty)) return e;
  if (auto e = ReadFloat(body, "frequency_penalty", {-2, 2}, &s->frequency_penalty)) return e;
  // llama.cpp spells it repeat_penalty, vLLM and transformers repetition_penalty.
  for (const char* key : {"repeat_penalty", "repetition_penalty"}) {
    if (auto e = ReadFloat(body, key, {0, 10, true}, &s->repetition_penalty)) return e;
  }
  std::optional<int64_t> top_k;
  if (auto e = ReadInt(body, "top_k", -1, kInt64Max, &top_k)) return e;
  if (top_k && *top_k >= 0) s->top_k = SaturateToInt(*top_k);
  std::optional<int64_t> seed;
  if (auto e = ReadInt(body, "seed", kInt64Min, kInt64Max, &seed)) return e;
  if (seed && *seed != -1) {
    uint64_t u = static_cast<uint64_t>(*seed);
    s->seed = static_cast<uint32_t>(u ^ (u >> 32));
  }
  return std::nullopt;
}

// Fields shared by both endpoints.
MaybeError ReadCommon(const Json& body, GenerationRequest* req) {
  std::optional<std::string> model;
  if (auto e = ReadString(body, "model", &model)) return e;
  if (model) req->model = *model;

  std::optional<int64_t> max_tokens;
  if (auto e = ReadInt(body, "max_tokens", 1, kInt64Max, &max_tokens)) return e;
  if (auto e = ReadInt(body, "max_completion_tokens", 1, kInt64Max, &max_tokens)) return e;
  if (max_tokens) req->max_tokens = SaturateToInt(*max_tokens);

  if (auto e = ReadStopStrings(body, "stop", &req->stop)) return e;

  std::optional<bool> stream;
  if (auto e = ReadBool(body, "stream", &stream)) return e;
  req->stream = stream.value_or(false);
  if (const Json* opts = FindField(body, "stream_options")) {
    if (!opts->is_object()) return FieldError("stream_options", "must be an object");
    std::optional<bool> include_usage;
    if (auto e = ReadBool(*opts, "include_usage", &include_usage, "stream_options")) return e;
    req->include_usage = include_usage.value_or(false);
  }

  std::optional<int64_t> n;
  if (auto e = ReadInt(body, "n", kInt64Min, kInt64Max, &n)) return e;
  if (n && *n != 1) return FieldError("n", "must be 1; this server returns one choice");

  std::optional<std::string> salt, user;
  if (auto e = ReadString(body, "cache_salt", &salt)) return e;
  if (salt) req->cache_salt = *salt;
  if (auto e = ReadString(body, "user", &user)) return e;  // accepted, unused
  std::optional<std::string> cache_key, retention;
  if (auto e = ReadString(body, "prompt_cache_key", &cache_key)) return e;
  if (cache_key) req->cache_hints.key = *cache_key;
  if (auto e = ReadString(body, "prompt_cache_retention", &retention)) return e;
  if (retention && *retention != "in_memory" && *retention != "24h") {
    return FieldError("prompt_cache_retention", "must be \"in_memory\" or \"24h\"");
  }
  req->cache_hints.extended = retention == "24h";

  return ReadSampling(body, &req->sampling);
}

MaybeError ReadToolCalls(const Json& calls, const std::string& path, Message* msg) {
  if (!calls.is_array()) return FieldError(path, "must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json& c = calls[i];
    const std::string call_path = IndexPath(path, i);
    if (!c.is_object()) return FieldError(call_path, "must be an object");
    std::optional<std::string> type, id, name;
    if (auto e = ReadString(c, "type", &type, call_path)) return e;
    if (type && *type != "function") {
      return FieldError(FieldPath(call_path, "type"), "must be \"function\"");
    }
    if (auto e = ReadString(c, "id", &id, call_path)) return e;
    const std::string fn_path = FieldPath(call_path, "function");
    const Json* fn = FindField(c, "function");
    if (fn == nullptr || !fn->is_object()) return FieldError(fn_path, "must be an object");
    if (auto e = ReadString(*fn, "name", &name, fn_path)) return e;
    if (!name || name->empty()) return FieldError(FieldPath(fn_path, "name"), "is required");
    ToolCall call{id.value_or(""), *name, "{}"};
    if (const Json* args = FindField(*fn, "arguments")) {
      // A JSON string as OpenAI sends it, or the object itself (some clients send that).
      if (!args->is_string() && !args->is_object()) {
        return FieldError(FieldPath(fn_path, "arguments"), "must be a string of JSON or an object");
      }
      // The text is kept as sent: re-serializing would change what the model sees
      // next turn and break prefix reuse.
      call.arguments = args->is_string() ? args->get<std::string>() : DumpJson(*args);
    }
    msg->tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

MaybeError ReadMessage(const Json& m, const std::string& path, Message* msg) {
  if (!m.is_object()) return FieldError(path, "must be an object");
  std::optional<std::string> role;
  if (auto e = ReadString(m, "role", &role, path)) return e;
  if (!role) return FieldError(FieldPath(path, "role"), "is required");
  if (*role == "developer") role = "system";
  if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
    return FieldError(FieldPath(path, "role"),
                      "must be one of \"system\", \"developer\", \"user\", \"assistant\", "
                      "\"tool\" (got \"" + *role + "\")");
  }
  msg->role = *role;

  const std::string content_path = FieldPath(path, "content");
  const Json* content = FindField(m, "content");
  if (content != nullptr) {
    if (auto e = ReadTextContent(*content, content_path, &msg->content)) return e;
  } else if (msg->role != "assistant") {
    // Assistant turns that only call tools send null content; nobody else may.
    return FieldError(content_path, "is required");
  }

  if (msg->role == "assistant") {
    // Clients that replay reasoning use either name.
    std::optional<std::string> reasoning;
    if (auto e = ReadString(m, "reasoning", &reasoning, path)) return e;
    if (auto e = ReadString(m, "reasoning_content", &reasoning, path)) return e;
    if (reasoning) msg->reasoning_content = *reasoning;
    if (const Json* calls = FindField(m, "tool_calls")) {
      if (auto e = ReadToolCalls(*calls, FieldPath(path, "tool_calls"), msg)) return e;
    }
  }
  if (msg->role == "tool") {
    std::optional<std::string> call_id, name;
    if (auto e = ReadString(m, "tool_call_id", &call_id, path)) return e;
    if (auto e = ReadString(m, "name", &name, path)) return e;
    msg->tool_call_id = call_id.value_or("");
    msg->tool_name = name.value_or("");
  }
  return std::nullopt;
}

MaybeError ReadMessages(const Json& body, std::vector<Message>* out) {
  const Json* messages = FindField(body, "messages");
  if (messages == nullptr) return FieldError("messages", "is required");
  if (!messages->is_array()) return FieldError("messages", "must be an array");
  if (messages->empty()) return FieldError("messages", "must not be empty");
  std::map<std::string, std::string> call_names;  // tool call id -> function name
  for (size_t i = 0; i < messages->size(); ++i) {
    Message msg;
    if (auto e = ReadMessage((*messages)[i], IndexPath("messages", i), &msg)) return e;
    for (const ToolCall& call : msg.tool_calls) call_names[call.id] = call.name;
    if (msg.role == "tool" && msg.tool_name.empty()) {
      auto it = call_names.find(msg.tool_call_id);
      if (it != call_names.end()) msg.tool_name = it->second;
    }
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

MaybeError ReadTools(const Json& body, std::vector<Tool>* out) {
  const Json* tools = FindField(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return FieldError("tools", "must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string path = IndexPath("tools", i);
    if (!t.is_object()) return FieldError(path, "must be an object");
    std::optional<std::string> type, name, description;
    if (auto e = ReadString(t, "type", &type, path)) return e;
    if (type && *type != "function") {
      return FieldError(FieldPath(path, "type"), "must be \"function\" (got \"" + *type + "\")");
    }
    const std::string fn_path = FieldPath(path, "function");
    const Json* fn = FindField(t, "function");
    if (fn == nullptr || !fn->is_object()) return FieldError(fn_path, "must be an object");
    if (auto e = ReadString(*fn, "name", &name, fn_path)) return e;
    if (!name || name->empty()) return FieldError(FieldPath(fn_path, "name"), "is required");
    for (size_t j = 0; j < out->size(); ++j) {
      if ((*out)[j].name == *name) {
        return FieldError(FieldPath(fn_path, "name"),
                          "\"" + *name + "\" is already declared by " + IndexPath("tools", j));
      }
    }
    if (auto e = ReadString(*fn, "description", &description, fn_path)) return e;
    Tool tool{*name, description.value_or(""), kEmptyParameters};
    if (const Json* params = FindField(*fn, "parameters")) {
      if (!params->is_object()) {
        return FieldError(FieldPath(fn_path, "parameters"), "must be a JSON schema object");
      }
      tool.parameters = DumpJson(*params);
    }
    out->push_back(std::move(tool));
  }
  return std::nullopt;
}

MaybeError ReadToolChoice(const Json& body, GenerationRequest* req) {
  std::optional<bool> parallel;
  if (auto e = ReadBool(body, "parallel_tool_calls", &parallel)) return e;
  req->parallel_tool_calls = parallel.value_or(true);

  const Json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string& s = choice->get_ref<const std::string&>();
    if (s != "auto" && s != "none" && s != "required") {
      return FieldError("tool_choice", "must be \"auto\", \"none\", \"required\" or "
                                       "{\"type\":\"function\",\"function\":{\"name\":...}}");
    }
    if (s == "required" && req->tools.empty()) {
      return FieldError("tool_choice", "is \"required\" but no tools were given");
    }
    req->tool_choice = s;
    return std::nullopt;
  }
  if (!choice->is_object()) return FieldError("tool_choice", "must be a string or an object");
  std::optional<std::string> type, name;
  if (auto e = ReadString(*choice, "type", &type, "tool_choice")) return e;
  if (type != "function") return FieldError("tool_choice.type", "must be \"function\"");
  const Json* fn = FindField(*choice, "function");
  if (fn == nullptr || !fn->is_object()) {
    return FieldError("tool_choice.function", "must be an object");
  }
  if (auto e = ReadString(*fn, "name", &name, "tool_choice.function")) return e;
  if (!name) return FieldError("tool_choice.function.name", "is required");
  bool declared = false;
  for (const Tool& t : req->tools) declared = declared || t.name == *name;
  if (!declared) {
    return FieldError("tool_choice.function.name", "\"" + *name + "\" is not one of the tools");
  }
  req->tool_choice = *name;
  return std::nullopt;
}

MaybeError ReadThinking(const Json& body, GenerationRequest* req) {
  std::optional<std::string> effort;
  if (auto e = ReadString(body, "reasoning_effort", &effort)) return e;
  if (effort) req->enable_thinking = *effort != "none";

  const Json* kwargs = FindField(body, "chat_template_kwargs");
  if (kwargs == nullptr) return std::nullopt;
  if (!kwargs->is_object()) return FieldError("chat_template_kwargs", "must be an object");
  for (const auto& [key, value] : kwargs->items()) {
    if (key == "enable_thinking") {
      if (!value.is_boolean()) {
        return FieldError("chat_template_kwargs.enable_thinking", "must be a boolean");
      }
      req->enable_thinking = value.get<bool>();
      continue;
    }
    req->template_kwargs[key] = DumpJson(value);
  }
  return std::nullopt;
}

// Features a client may ask for that this server does not provide: refuse them loudly
// rather than return something the client did not ask for.
MaybeError RefuseUnsupported(const Json& body) {
  if (const Json* logprobs = FindField(body, "logprobs")) {
    // Chat sends a boolean, /v1/completions a count; false and 0 ask for nothing.
    bool wants = logprobs->is_boolean() ? logprobs->get<bool>()
                 : logprobs->is_number() ? logprobs->get<double>() != 0
                                          : true;
    if (wants) return FieldError("logprobs", "is not supported");
  }
  if (const Json* format = FindField(body, "response_format")) {
    if (!format->is_object()) return FieldError("response_format", "must be an object");
    std::optional<std::string> type;
    if (auto e = ReadString(*format, "type", &type, "response_format")) return e;
    if (type && *type != "text") {
      return FieldError("response_format.type", "\"" + *type + "\" is not supported yet");
    }
  }
  return std::nullopt;
}

MaybeError ReadPrompt(const Json& body, GenerationRequest* req) {
  const Json* prompt = FindField(body, "prompt");
  if (prompt == nullptr) return FieldError("prompt", "is required");
  if (prompt->is_string()) {
    req->prompt = prompt->get<std::string>();
    return std::nullopt;
  }
  if (!prompt->is_array()) return FieldError("prompt", "must be a string or an array of strings");
  if (prompt->size() != 1) {
    return FieldError("prompt", "must hold exactly one prompt (got " +
                                    std::to_string(prompt->size()) + ")");
  }
  const Json& first = (*prompt)[0];
  if (first.is_number_integer() || first.is_array()) {
    return FieldError("prompt", "as token ids is not supported; send text");
  }
  if (!first.is_string()) return FieldError("prompt[0]", "must be a string");
  req->prompt = first.get<std::string>();
  return std::nullopt;
}

MaybeError RefuseUnsupportedCompletion(const Json& body) {
  std::optional<bool> echo;
  if (auto e = ReadBool(body, "echo", &echo)) return e;
  if (echo.value_or(false)) return FieldError("echo", "is not supported");
  std::optional<std::string> suffix;
  if (auto e = ReadString(body, "suffix", &suffix)) return e;
  if (suffix && !suffix->empty()) return FieldError("suffix", "is not supported");
  std::optional<int64_t> best_of;
  if (auto e = ReadInt(body, "best_of", kInt64Min, kInt64Max, &best_of)) return e;
  if (best_of && *best_of != 1) return FieldError("best_of", "must be 1");
  return std::nullopt;
}

ParseResult<GenerationRequest> ParseChat(const Json& body) {
  GenerationRequest req;
  req.flavor = Flavor::kOpenAIChat;
  if (auto e = ReadMessages(body, &req.messages)) return *e;
  if (auto e = ReadCommon(body, &req)) return *e;
  if (auto e = ReadTools(body, &req.tools)) return *e;
  if (auto e = ReadToolChoice(body, &req)) return *e;  // after tools: names are checked
  if (auto e = ReadThinking(body, &req)) return *e;
  if (auto e = RefuseUnsupported(body)) return *e;
  return req;
}

ParseResult<GenerationRequest> ParseCompletion(const Json& body) {
  GenerationRequest req;
  req.flavor = Flavor::kOpenAICompletion;
  if (auto e = ReadPrompt(body, &req)) return *e;
  if (auto e = ReadCommon(body, &req)) return *e;
  if (auto e = RefuseUnsupported(body)) return *e;
  if (auto e = RefuseUnsupportedCompletion(body)) return *e;
  return req;
}

}  // namespace

ParseResult<GenerationRequest> ParseChatCompletionRequest(std::string_view body) {
  return ParseObjectWith<GenerationRequest>(body, ParseChat);
}

ParseResult<GenerationRequest> ParseCompletionRequest(std::string_view body) {
  return ParseObjectWith<GenerationRequest>(body, ParseCompletion);
}

}  // namespace hearth::api::openai
