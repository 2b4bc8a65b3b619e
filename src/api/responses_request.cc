// Request parsing for the Responses API. See responses.h for the mapping rules.
#include <cstdint>
#include <limits>
#include <map>

#include "api/json_fields.h"
#include "api/responses.h"

namespace hearth::api::responses {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr const char* kEmptyParameters = R"({"type":"object","properties":{}})";

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Message content: a string, or input_text / output_text parts (refusal parts are the
// model's own text too). `path` names `content`.
MaybeError ReadContent(const Json& content, const std::string& path, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return FieldError(path, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_path = IndexPath(path, i);
    if (!part.is_object()) return FieldError(part_path, "must be an object");
    std::optional<std::string> type, piece;
    if (auto e = ReadString(part, "type", &type, part_path)) return e;
    if (!type) return FieldError(FieldPath(part_path, "type"), "is required");
    if (IsMediaPartType(*type)) return TextOnlyError(part_path, *type);
    const char* key = *type == "refusal" ? "refusal" : "text";
    if (*type != "input_text" && *type != "output_text" && *type != "text" && *type != "refusal") {
      return FieldError(FieldPath(part_path, "type"),
                        Quote(*type) + " is not a supported content part type (input_text, output_text)");
    }
    if (auto e = ReadString(part, key, &piece, part_path)) return e;
    if (!piece) return FieldError(FieldPath(part_path, key), "is required");
    AppendPart(&text, *piece);
  }
  *out = std::move(text);
  return std::nullopt;
}

// Reasoning text: the reasoning_text content when there is any, else the summary.
MaybeError ReadReasoning(const Json& item, const std::string& path, std::string* out) {
  for (const char* key : {"content", "summary"}) {
    const Json* parts = FindField(item, key);
    if (parts == nullptr) continue;
    const std::string parts_path = FieldPath(path, key);
    if (!parts->is_array()) return FieldError(parts_path, "must be an array");
    std::string text;
    for (size_t i = 0; i < parts->size(); ++i) {
      const Json& part = (*parts)[i];
      const std::string part_path = IndexPath(parts_path, i);
      if (!part.is_object()) return FieldError(part_path, "must be an object");
      std::optional<std::string> piece;
      if (auto e = ReadString(part, "text", &piece, part_path)) return e;
      if (!piece) return FieldError(FieldPath(part_path, "text"), "is required");
      AppendPart(&text, *piece);
    }
    if (!text.empty()) {
      *out = std::move(text);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Builds messages from input items, collapsing each run of assistant-side items into one
// assistant message.
class InputReader {
 public:
  explicit InputReader(std::vector<Message>* out) : out_(out) {}

  MaybeError Read(const Json& item, const std::string& path) {
    if (!item.is_object()) return FieldError(path, "must be an object");
    std::optional<std::string> type;
    if (auto e = ReadString(item, "type", &type, path)) return e;
    if (!type || *type == "message") return ReadMessage(item, path);
    if (*type == "function_call") return ReadFunctionCall(item, path);
    if (*type == "function_call_output") return ReadFunctionCallOutput(item, path);
    if (*type == "reasoning") {
      std::string text;
      if (auto e = ReadReasoning(item, path, &text)) return e;
      if (!text.empty()) AppendPart(&Assistant().reasoning_content, text);  // encrypted-only: nothing to show
      return std::nullopt;
    }
    if (*type == "item_reference") {
      return FieldError(FieldPath(path, "type"), "\"item_reference\" is not supported; send the item itself");
    }
    return FieldError(FieldPath(path, "type"),
                      Quote(*type) + " is not supported (message, function_call, function_call_output, reasoning)");
  }

 private:
  // The assistant message the current run of assistant items goes into.
  Message& Assistant() {
    if (out_->empty() || !in_assistant_run_) {
      out_->push_back(Message{.role = "assistant"});
      in_assistant_run_ = true;
    }
    return out_->back();
  }

  MaybeError ReadMessage(const Json& item, const std::string& path) {
    std::optional<std::string> role;
    if (auto e = ReadString(item, "role", &role, path)) return e;
    if (!role) return FieldError(FieldPath(path, "role"), "is required");
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant") {
      return FieldError(FieldPath(path, "role"),
                        "must be one of \"user\", \"system\", \"developer\", \"assistant\" (got " + Quote(*role) + ")");
    }
    const Json* content = FindField(item, "content");
    if (content == nullptr) return FieldError(FieldPath(path, "content"), "is required");
    std::string text;
    if (auto e = ReadContent(*content, FieldPath(path, "content"), &text)) return e;
    if (*role == "assistant") {
      AppendPart(&Assistant().content, text);
      return std::nullopt;
    }
    in_assistant_run_ = false;
    out_->push_back(Message{.role = *role, .content = std::move(text)});
    return std::nullopt;
  }

  MaybeError ReadFunctionCall(const Json& item, const std::string& path) {
    std::optional<std::string> call_id, name;
    if (auto e = ReadString(item, "call_id", &call_id, path)) return e;
    if (!call_id || call_id->empty()) return FieldError(FieldPath(path, "call_id"), "is required");
    if (auto e = ReadString(item, "name", &name, path)) return e;
    if (!name || name->empty()) return FieldError(FieldPath(path, "name"), "is required");
    ToolCall call{*call_id, *name, "{}"};
    if (const Json* args = FindField(item, "arguments")) {
      if (!args->is_string()) return FieldError(FieldPath(path, "arguments"), "must be a string of JSON");
      call.arguments = args->get<std::string>();  // verbatim: the model sees what it wrote
    }
    Assistant().tool_calls.push_back(std::move(call));
    return std::nullopt;
  }

  MaybeError ReadFunctionCallOutput(const Json& item, const std::string& path) {
    std::optional<std::string> call_id;
    if (auto e = ReadString(item, "call_id", &call_id, path)) return e;
    if (!call_id || call_id->empty()) return FieldError(FieldPath(path, "call_id"), "is required");
    const Json* output = FindField(item, "output");
    if (output == nullptr) return FieldError(FieldPath(path, "output"), "is required");
    Message msg{.role = "tool", .tool_call_id = *call_id};
    if (auto e = ReadContent(*output, FieldPath(path, "output"), &msg.content)) return e;
    in_assistant_run_ = false;
    out_->push_back(std::move(msg));
    return std::nullopt;
  }

  std::vector<Message>* out_;
  bool in_assistant_run_ = false;
};

MaybeError ReadInput(const Json& body, std::vector<Message>* out) {
  const Json* input = FindField(body, "input");
  if (input == nullptr) return FieldError("input", "is required");
  if (input->is_string()) {
    out->push_back(Message{.role = "user", .content = input->get<std::string>()});
    return std::nullopt;
  }
  if (!input->is_array()) return FieldError("input", "must be a string or an array of input items");
  if (input->empty()) return FieldError("input", "must not be empty");
  InputReader reader(out);
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto e = reader.Read((*input)[i], IndexPath("input", i))) return e;
  }
  return std::nullopt;
}

MaybeError ReadFunctionTool(const Json& t, const std::string& path, std::vector<Tool>* out) {
  std::optional<std::string> name, description;
  if (auto e = ReadString(t, "name", &name, path)) return e;
  if (!name || name->empty()) return FieldError(FieldPath(path, "name"), "is required");
  for (const Tool& declared : *out) {
    if (declared.name == *name) return FieldError(FieldPath(path, "name"), Quote(*name) + " is declared twice");
  }
  if (auto e = ReadString(t, "description", &description, path)) return e;
  std::optional<bool> strict;
  if (auto e = ReadBool(t, "strict", &strict, path)) return e;  // accepted; not enforced
  Tool tool{*name, description.value_or(""), kEmptyParameters};
  if (const Json* params = FindField(t, "parameters")) {
    if (!params->is_object()) return FieldError(FieldPath(path, "parameters"), "must be a JSON schema object");
    tool.parameters = DumpJson(*params);
  }
  out->push_back(std::move(tool));
  return std::nullopt;
}

// Function tools, also inside a namespace (a named group of them; its functions are
// declared by their own names). Other types are tools the API's host runs (web_search,
// file_search, ...) or freeform ones: dropped, as clients such as Codex send them always.
MaybeError ReadTools(const Json& body, std::vector<Tool>* out) {
  const Json* tools = FindField(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return FieldError("tools", "must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string path = IndexPath("tools", i);
    if (!t.is_object()) return FieldError(path, "must be an object");
    std::optional<std::string> type;
    if (auto e = ReadString(t, "type", &type, path)) return e;
    if (!type) return FieldError(FieldPath(path, "type"), "is required");
    if (*type == "function") {
      if (auto e = ReadFunctionTool(t, path, out)) return e;
      continue;
    }
    if (*type != "namespace") continue;
    const Json* inner = FindField(t, "tools");
    const std::string inner_path = FieldPath(path, "tools");
    if (inner == nullptr || !inner->is_array()) return FieldError(inner_path, "must be an array");
    for (size_t j = 0; j < inner->size(); ++j) {
      const Json& f = (*inner)[j];
      const std::string f_path = IndexPath(inner_path, j);
      if (!f.is_object()) return FieldError(f_path, "must be an object");
      std::optional<std::string> f_type;
      if (auto e = ReadString(f, "type", &f_type, f_path)) return e;
      if (f_type.value_or("function") != "function") continue;
      if (auto e = ReadFunctionTool(f, f_path, out)) return e;
    }
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
      return FieldError("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":...}");
    }
    if (s == "required" && req->tools.empty()) return FieldError("tool_choice", "is \"required\" but no tools were given");
    req->tool_choice = s;
    return std::nullopt;
  }
  if (!choice->is_object()) return FieldError("tool_choice", "must be a string or an object");
  std::optional<std::string> type, name;
  if (auto e = ReadString(*choice, "type", &type, "tool_choice")) return e;
  if (type != "function") return FieldError("tool_choice.type", "must be \"function\"");
  if (auto e = ReadString(*choice, "name", &name, "tool_choice")) return e;
  if (!name) return FieldError("tool_choice.name", "is required");
  bool declared = false;
  for (const Tool& t : req->tools) declared = declared || t.name == *name;
  if (!declared) return FieldError("tool_choice.name", Quote(*name) + " is not one of the tools");
  req->tool_choice = *name;
  return std::nullopt;
}

MaybeError ReadOptions(const Json& body, ResponsesRequest* r) {
  GenerationRequest& req = r->generation;
  std::optional<std::string> model, instructions, previous, cache_key, retention;
  if (auto e = ReadString(body, "model", &model)) return e;
  if (model) req.model = *model;
  if (auto e = ReadString(body, "instructions", &instructions)) return e;
  if (instructions && !instructions->empty()) r->instructions = *instructions;
  if (auto e = ReadString(body, "previous_response_id", &previous)) return e;
  if (previous && previous->empty()) return FieldError("previous_response_id", "must not be empty");
  r->previous_response_id = previous;
  std::optional<bool> store, stream, background;
  if (auto e = ReadBool(body, "store", &store)) return e;
  r->store = store.value_or(true);
  if (auto e = ReadBool(body, "stream", &stream)) return e;
  req.stream = stream.value_or(false);
  if (auto e = ReadBool(body, "background", &background)) return e;
  if (background.value_or(false)) return FieldError("background", "is not supported; stream instead");
  if (FindField(body, "conversation") != nullptr) {
    return FieldError("conversation", "is not supported; use previous_response_id or send the items");
  }

  std::optional<int64_t> max_tokens, top_logprobs;
  if (auto e = ReadInt(body, "max_output_tokens", 1, kInt64Max, &max_tokens)) return e;
  if (max_tokens) req.max_tokens = SaturateToInt(*max_tokens);
  // Not OpenAI's: llama-server's /v1/responses takes chat's `stop` too.
  if (auto e = ReadStopStrings(body, "stop", &req.stop)) return e;
  if (auto e = ReadInt(body, "top_logprobs", 0, 20, &top_logprobs)) return e;
  if (top_logprobs.value_or(0) > 0) return FieldError("top_logprobs", "is not supported");
  if (auto e = ReadFloat(body, "temperature", {0, 2}, &req.sampling.temperature)) return e;
  if (auto e = ReadFloat(body, "top_p", {0, 1, true}, &req.sampling.top_p)) return e;

  if (auto e = ReadString(body, "prompt_cache_key", &cache_key)) return e;
  if (cache_key) req.cache_hints.key = *cache_key;
  if (auto e = ReadString(body, "prompt_cache_retention", &retention)) return e;
  if (retention && *retention != "in_memory" && *retention != "24h") {
    return FieldError("prompt_cache_retention", "must be \"in_memory\" or \"24h\"");
  }
  req.cache_hints.extended = retention == "24h";

  if (const Json* reasoning = FindField(body, "reasoning")) {
    if (!reasoning->is_object()) return FieldError("reasoning", "must be an object");
    std::optional<std::string> effort;
    if (auto e = ReadString(*reasoning, "effort", &effort, "reasoning")) return e;
    if (effort) req.enable_thinking = *effort != "none";
  }
  if (const Json* text = FindField(body, "text")) {
    if (!text->is_object()) return FieldError("text", "must be an object");
    if (const Json* format = FindField(*text, "format")) {
      if (!format->is_object()) return FieldError("text.format", "must be an object");
      std::optional<std::string> type;
      if (auto e = ReadString(*format, "type", &type, "text.format")) return e;
      if (type && *type != "text") return FieldError("text.format.type", Quote(*type) + " is not supported yet");
    }
  }
  return std::nullopt;
}

ParseResult<ResponsesRequest> Parse(const Json& body) {
  ResponsesRequest r;
  r.generation.flavor = Flavor::kOpenAIResponses;
  if (auto e = ReadInput(body, &r.generation.messages)) return *e;
  if (auto e = ReadOptions(body, &r)) return *e;
  if (auto e = ReadTools(body, &r.generation.tools)) return *e;
  if (auto e = ReadToolChoice(body, &r.generation)) return *e;  // after tools: names are checked
  return r;
}

}  // namespace

ParseResult<ResponsesRequest> ParseResponsesRequest(std::string_view body) {
  return ParseObjectWith<ResponsesRequest>(body, Parse);
}

std::vector<Message> Conversation(const ResponsesRequest& request, const std::vector<Message>& history) {
  std::vector<Message> out;
  if (request.instructions) out.push_back(Message{.role = "system", .content = *request.instructions});
  out.insert(out.end(), history.begin(), history.end());
  out.insert(out.end(), request.generation.messages.begin(), request.generation.messages.end());
  std::map<std::string, std::string> call_names;  // call id -> function name; the latest wins
  for (Message& m : out) {
    for (const ToolCall& call : m.tool_calls) call_names[call.id] = call.name;
    if (m.role != "tool" || !m.tool_name.empty()) continue;
    auto it = call_names.find(m.tool_call_id);
    if (it != call_names.end()) m.tool_name = it->second;
  }
  return out;
}

std::vector<Message> StoredConversation(const ResponsesRequest& request, const std::vector<Message>& history,
                                        const Completion& reply) {
  std::vector<Message> out = history;
  out.insert(out.end(), request.generation.messages.begin(), request.generation.messages.end());
  out.push_back(Message{.role = "assistant",
                        .content = reply.content,
                        .reasoning_content = reply.reasoning,
                        .tool_calls = reply.tool_calls});
  return out;
}

ResponseInfo InfoFor(const ResponsesRequest& request, std::string id, std::string model, int64_t created_at) {
  const GenerationRequest& g = request.generation;
  ResponseInfo info;
  info.id = std::move(id);
  info.model = std::move(model);
  info.created_at = created_at;
  info.instructions = request.instructions;
  info.previous_response_id = request.previous_response_id;
  info.tools = g.tools;
  info.tool_choice = g.tool_choice;
  info.parallel_tool_calls = g.parallel_tool_calls;
  info.temperature = g.sampling.temperature;
  info.top_p = g.sampling.top_p;
  info.max_output_tokens = g.max_tokens;
  info.store = request.store;
  return info;
}

}  // namespace hearth::api::responses
