// Request parsing for the Anthropic Messages API. See anthropic.h for the mapping rules.
#include <limits>
#include <map>

#include "api/anthropic.h"
#include "api/json_fields.h"

namespace hearth::api::anthropic {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Anthropic's own limit on blocks with cache_control in one request.
constexpr size_t kMaxCacheBreakpoints = 4;

// Schema for a tool declared without input_schema: templates expect an object.
constexpr const char* kEmptySchema = R"({"type":"object","properties":{}})";

// tool_use id -> tool name, collected from assistant turns so that the tool messages
// answering them can carry the name (some chat templates print it).
using CallNames = std::map<std::string, std::string>;

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

Message MakeMessage(std::string role, std::string content = "") {
  Message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

// The block's "type", required.
MaybeError ReadBlockType(const Json& block, const std::string& path, std::string* type) {
  if (!block.is_object()) return FieldError(path, "must be an object");
  std::optional<std::string> t;
  if (auto e = ReadString(block, "type", &t, path)) return e;
  if (!t) return FieldError(FieldPath(path, "type"), "is required");
  *type = *t;
  return std::nullopt;
}

MaybeError ReadRequiredString(const Json& obj, std::string_view key, const std::string& path,
                              std::string* out) {
  std::optional<std::string> v;
  if (auto e = ReadString(obj, key, &v, path)) return e;
  if (!v) return FieldError(FieldPath(path, key), "is required");
  *out = *v;
  return std::nullopt;
}

MaybeError ReadToolResult(const Json& block, const std::string& path, const CallNames& names,
                          Message* msg) {
  msg->role = "tool";
  if (auto e = ReadRequiredString(block, "tool_use_id", path, &msg->tool_call_id)) return e;
  auto it = names.find(msg->tool_call_id);
  if (it != names.end()) msg->tool_name = it->second;
  std::optional<bool> is_error;
  if (auto e = ReadBool(block, "is_error", &is_error, path)) return e;
  const Json* content = FindField(block, "content");
  if (content == nullptr) return std::nullopt;  // a tool that printed nothing
  return ReadTextContent(*content, FieldPath(path, "content"), &msg->content);
}

// A user turn: text runs and tool results, split into messages in order.
MaybeError ReadUserBlocks(const Json& blocks, const std::string& path, const CallNames& names,
                          std::vector<Message>* out) {
  std::optional<Message> text_run;
  size_t n_before = out->size();
  for (size_t j = 0; j < blocks.size(); ++j) {
    const Json& block = blocks[j];
    const std::string block_path = IndexPath(path, j);
    std::string type;
    if (auto e = ReadBlockType(block, block_path, &type)) return e;
    if (type == "text") {
      std::string text;
      if (auto e = ReadRequiredString(block, "text", block_path, &text)) return e;
      if (!text_run) text_run = MakeMessage("user");
      AppendPart(&text_run->content, text);
    } else if (type == "tool_result") {
      if (text_run) out->push_back(*std::move(text_run));
      text_run.reset();
      Message msg;
      if (auto e = ReadToolResult(block, block_path, names, &msg)) return e;
      out->push_back(std::move(msg));
    } else if (IsMediaPartType(type)) {
      return TextOnlyError(block_path, type);
    } else {
      return FieldError(FieldPath(block_path, "type"),
                        Quoted(type) + " is not a supported block in a user message");
    }
  }
  if (text_run) out->push_back(*std::move(text_run));
  // content: [] still takes a turn; keep it so that roles keep alternating.
  if (out->size() == n_before) out->push_back(MakeMessage("user"));
  return std::nullopt;
}

// Blocks left behind by Anthropic-hosted tools; they mean nothing to a local model.
bool IsServerToolBlock(const std::string& type) {
  return type == "server_tool_use" || type == "mcp_tool_use" ||
         (type.size() > 12 && type.ends_with("_tool_result"));
}

MaybeError ReadToolUse(const Json& block, const std::string& path, Message* msg) {
  ToolCall call;
  if (auto e = ReadRequiredString(block, "id", path, &call.id)) return e;
  if (auto e = ReadRequiredString(block, "name", path, &call.name)) return e;
  const Json* input = FindField(block, "input");
  if (input != nullptr && !input->is_object()) {
    return FieldError(FieldPath(path, "input"), "must be an object");
  }
  call.arguments = input != nullptr ? DumpJson(*input) : "{}";
  msg->tool_calls.push_back(std::move(call));
  return std::nullopt;
}

MaybeError ReadAssistantBlocks(const Json& blocks, const std::string& path, Message* msg) {
  for (size_t j = 0; j < blocks.size(); ++j) {
    const Json& block = blocks[j];
    const std::string block_path = IndexPath(path, j);
    std::string type;
    if (auto e = ReadBlockType(block, block_path, &type)) return e;
    if (type == "text") {
      std::string text;
      if (auto e = ReadRequiredString(block, "text", block_path, &text)) return e;
      AppendPart(&msg->content, text);
    } else if (type == "thinking") {
      std::string thinking;
      if (auto e = ReadRequiredString(block, "thinking", block_path, &thinking)) return e;
      AppendPart(&msg->reasoning_content, thinking);
    } else if (type == "tool_use") {
      if (auto e = ReadToolUse(block, block_path, msg)) return e;
    } else if (type == "redacted_thinking" || IsServerToolBlock(type)) {
      continue;
    } else if (IsMediaPartType(type)) {
      return TextOnlyError(block_path, type);
    } else {
      return FieldError(FieldPath(block_path, "type"),
                        Quoted(type) + " is not a supported block in an assistant message");
    }
  }
  return std::nullopt;
}

// `ends[i]`: how many messages `out` holds once wire message i is read.
MaybeError ReadMessages(const Json& body, std::vector<Message>* out, std::vector<size_t>* ends) {
  const Json* messages = FindField(body, "messages");
  if (messages == nullptr) return FieldError("messages", "is required");
  if (!messages->is_array()) return FieldError("messages", "must be an array");
  if (messages->empty()) return FieldError("messages", "must not be empty");
  CallNames names;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string path = IndexPath("messages", i);
    if (!m.is_object()) return FieldError(path, "must be an object");
    std::string role;
    if (auto e = ReadRequiredString(m, "role", path, &role)) return e;
    if (role != "user" && role != "assistant" && role != "system") {
      return FieldError(FieldPath(path, "role"),
                        "must be \"user\", \"assistant\" or \"system\" (got " + Quoted(role) + ")");
    }
    const std::string content_path = FieldPath(path, "content");
    const Json* content = FindField(m, "content");
    if (content == nullptr) return FieldError(content_path, "is required");
    ends->push_back(out->size() + 1);  // corrected below when a user turn splits
    if (content->is_string()) {
      out->push_back(MakeMessage(role, content->get<std::string>()));
      continue;
    }
    if (!content->is_array()) {
      return FieldError(content_path, "must be a string or an array of content blocks");
    }
    if (role == "system") {
      Message msg = MakeMessage("system");
      if (auto e = ReadTextContent(*content, content_path, &msg.content)) return e;
      out->push_back(std::move(msg));
      continue;
    }
    if (role == "user") {
      if (auto e = ReadUserBlocks(*content, content_path, names, out)) return e;
      ends->back() = out->size();
      continue;
    }
    Message msg = MakeMessage("assistant");
    if (auto e = ReadAssistantBlocks(*content, content_path, &msg)) return e;
    for (const ToolCall& call : msg.tool_calls) names[call.id] = call.name;
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

MaybeError ReadSystem(const Json& body, std::vector<Message>* out) {
  const Json* system = FindField(body, "system");
  if (system == nullptr) return std::nullopt;
  Message msg = MakeMessage("system");
  if (auto e = ReadTextContent(*system, "system", &msg.content)) return e;
  if (!msg.content.empty()) out->push_back(std::move(msg));
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
    std::optional<std::string> type, description;
    if (auto e = ReadString(t, "type", &type, path)) return e;
    if (type && *type != "custom") continue;  // Anthropic-hosted: bash_20250124, web_search_*
    Tool tool;
    if (auto e = ReadRequiredString(t, "name", path, &tool.name)) return e;
    for (size_t j = 0; j < out->size(); ++j) {
      if ((*out)[j].name == tool.name) {
        return FieldError(FieldPath(path, "name"), Quoted(tool.name) + " is already declared");
      }
    }
    if (auto e = ReadString(t, "description", &description, path)) return e;
    tool.description = description.value_or("");
    tool.parameters = kEmptySchema;
    if (const Json* schema = FindField(t, "input_schema")) {
      if (!schema->is_object()) {
        return FieldError(FieldPath(path, "input_schema"), "must be a JSON schema object");
      }
      tool.parameters = DumpJson(*schema);
    }
    out->push_back(std::move(tool));
  }
  return std::nullopt;
}

MaybeError ReadToolChoice(const Json& body, GenerationRequest* req) {
  const Json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (!choice->is_object()) return FieldError("tool_choice", "must be an object");
  std::string type;
  if (auto e = ReadRequiredString(*choice, "type", "tool_choice", &type)) return e;
  std::optional<bool> no_parallel;
  if (auto e = ReadBool(*choice, "disable_parallel_tool_use", &no_parallel, "tool_choice")) {
    return e;
  }
  req->parallel_tool_calls = !no_parallel.value_or(false);
  if (type == "auto" || type == "none") {
    req->tool_choice = type;
  } else if (type == "any") {
    if (req->tools.empty()) return FieldError("tool_choice", "is \"any\" but no tools were given");
    req->tool_choice = "required";
  } else if (type == "tool") {
    std::string name;
    if (auto e = ReadRequiredString(*choice, "name", "tool_choice", &name)) return e;
    bool declared = false;
    for (const Tool& t : req->tools) declared = declared || t.name == name;
    if (!declared) return FieldError("tool_choice.name", Quoted(name) + " is not one of the tools");
    req->tool_choice = name;
  } else {
    return FieldError("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\"");
  }
  return std::nullopt;
}

MaybeError ReadThinking(const Json& body, GenerationRequest* req) {
  const Json* thinking = FindField(body, "thinking");
  if (thinking == nullptr) return std::nullopt;
  if (!thinking->is_object()) return FieldError("thinking", "must be an object");
  std::string type;
  if (auto e = ReadRequiredString(*thinking, "type", "thinking", &type)) return e;
  std::optional<int64_t> budget;
  if (auto e = ReadInt(*thinking, "budget_tokens", 0, kInt64Max, &budget, "thinking")) return e;
  if (type == "enabled") {
    req->enable_thinking = true;
  } else if (type == "disabled") {
    req->enable_thinking = false;
  } else if (type != "adaptive") {
    return FieldError("thinking.type", "must be \"enabled\", \"disabled\" or \"adaptive\"");
  }
  return std::nullopt;
}

// One block's cache_control: {"type":"ephemeral"} with an optional "ttl" of "5m" or
// "1h". A breakpoint keeps the prompt through the end of message `message`.
MaybeError ReadCacheControl(const Json& block, const std::string& path, int message, CacheHints* hints) {
  if (!block.is_object()) return std::nullopt;
  const Json* cc = FindField(block, "cache_control");
  if (cc == nullptr || cc->is_null()) return std::nullopt;
  const std::string cc_path = FieldPath(path, "cache_control");
  if (!cc->is_object()) return FieldError(cc_path, "must be an object");
  std::string type;
  if (auto e = ReadRequiredString(*cc, "type", cc_path, &type)) return e;
  if (type != "ephemeral") return FieldError(FieldPath(cc_path, "type"), "must be \"ephemeral\"");
  std::optional<std::string> ttl;
  if (auto e = ReadString(*cc, "ttl", &ttl, cc_path)) return e;
  if (ttl && *ttl != "5m" && *ttl != "1h") return FieldError(FieldPath(cc_path, "ttl"), "must be \"5m\" or \"1h\"");
  if (hints->breakpoints.size() == kMaxCacheBreakpoints) {
    return FieldError(cc_path, "may be set on at most " + std::to_string(kMaxCacheBreakpoints) + " blocks");
  }
  hints->breakpoints.push_back({message, ttl == "1h" ? 3600 : 300});
  return std::nullopt;
}

// cache_control on tools, system blocks and message blocks, in prompt order. Tools and
// system blocks keep the system turn (message 0: templates render tools there).
MaybeError ReadCacheControls(const Json& body, const std::vector<size_t>& ends, CacheHints* hints) {
  if (const Json* tools = FindField(body, "tools"); tools != nullptr && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      if (auto e = ReadCacheControl((*tools)[i], IndexPath("tools", i), 0, hints)) return e;
    }
  }
  if (const Json* system = FindField(body, "system"); system != nullptr && system->is_array()) {
    for (size_t j = 0; j < system->size(); ++j) {
      if (auto e = ReadCacheControl((*system)[j], IndexPath("system", j), 0, hints)) return e;
    }
  }
  const Json* messages = FindField(body, "messages");
  for (size_t i = 0; messages != nullptr && i < messages->size() && i < ends.size(); ++i) {
    const Json* content = FindField((*messages)[i], "content");
    if (content == nullptr || !content->is_array()) continue;
    const std::string path = FieldPath(IndexPath("messages", i), "content");
    for (size_t j = 0; j < content->size(); ++j) {
      if (auto e = ReadCacheControl((*content)[j], IndexPath(path, j), static_cast<int>(ends[i]) - 1, hints)) return e;
    }
  }
  return std::nullopt;
}

ParseResult<GenerationRequest> ParseBody(const Json& body, bool require_max_tokens) {
  GenerationRequest req;
  req.flavor = Flavor::kAnthropic;
  std::optional<std::string> model;
  if (auto e = ReadString(body, "model", &model)) return *e;
  req.model = model.value_or("");

  if (auto e = ReadSystem(body, &req.messages)) return *e;
  std::vector<size_t> ends;  // per wire message
  if (auto e = ReadMessages(body, &req.messages, &ends)) return *e;

  std::optional<int64_t> max_tokens;
  if (auto e = ReadInt(body, "max_tokens", 1, kInt64Max, &max_tokens)) return *e;
  if (!max_tokens && require_max_tokens) return FieldError("max_tokens", "is required");
  if (max_tokens) req.max_tokens = SaturateToInt(*max_tokens);

  if (auto e = ReadStopStrings(body, "stop_sequences", &req.stop)) return *e;
  std::optional<bool> stream;
  if (auto e = ReadBool(body, "stream", &stream)) return *e;
  req.stream = stream.value_or(false);

  Sampling& s = req.sampling;
  if (auto e = ReadFloat(body, "temperature", {0, 1}, &s.temperature)) return *e;
  if (auto e = ReadFloat(body, "top_p", {0, 1, true}, &s.top_p)) return *e;
  std::optional<int64_t> top_k;
  if (auto e = ReadInt(body, "top_k", 0, kInt64Max, &top_k)) return *e;
  if (top_k) s.top_k = SaturateToInt(*top_k);

  if (auto e = ReadTools(body, &req.tools)) return *e;
  if (auto e = ReadToolChoice(body, &req)) return *e;
  if (auto e = ReadThinking(body, &req)) return *e;
  if (auto e = ReadCacheControls(body, ends, &req.cache_hints)) return *e;
  return req;
}

}  // namespace

ParseResult<GenerationRequest> ParseMessagesRequest(std::string_view body) {
  return ParseObjectWith<GenerationRequest>(
      body, [](const Json& json) { return ParseBody(json, /*require_max_tokens=*/true); });
}

ParseResult<GenerationRequest> ParseCountTokensRequest(std::string_view body) {
  return ParseObjectWith<GenerationRequest>(
      body, [](const Json& json) { return ParseBody(json, /*require_max_tokens=*/false); });
}

}  // namespace hearth::api::anthropic
