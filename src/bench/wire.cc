#include "bench/wire.h"

namespace hearth::bench {
namespace {

std::string StringContent(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const Json& b : content) {
      if (b.is_object() && b.value("type", "") == "text") out += b.value("text", "");
    }
  }
  return out;
}

Json ArgumentsObject(const Json& call) {
  const Json& fn = call.contains("function") ? call["function"] : call;
  const Json args = fn.value("arguments", Json("{}"));
  if (args.is_object()) return args;
  Json parsed = Json::parse(args.is_string() ? args.get<std::string>() : std::string("{}"), nullptr, false);
  return parsed.is_object() ? parsed : Json::object();
}

void SetThinking(const ChatRequest& r, Json* body) {
  if (r.thinking) (*body)["chat_template_kwargs"] = {{"enable_thinking", *r.thinking}};
}

bool LooksAnthropic(const Json& body) {
  if (body.contains("system")) return true;
  for (const Json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (const Json& b : m["content"]) {
      const std::string t = b.is_object() ? b.value("type", "") : "";
      if (t == "tool_use" || t == "tool_result" || t == "thinking") return true;
    }
  }
  return false;
}

}  // namespace

Json OpenAIBody(const ChatRequest& r, const std::string& model) {
  Json body;
  if (!model.empty()) body["model"] = model;
  body["messages"] = r.messages;
  if (!r.tools.empty()) body["tools"] = r.tools;
  body["max_tokens"] = r.max_tokens;
  if (r.temperature) body["temperature"] = *r.temperature;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (!r.session_key.empty()) body["prompt_cache_key"] = r.session_key;
  SetThinking(r, &body);
  return body;
}

Json AnthropicBody(const ChatRequest& r, const std::string& model) {
  Json body;
  body["model"] = model.empty() ? "default" : model;
  body["max_tokens"] = r.max_tokens;
  if (!r.session_key.empty()) body["metadata"] = {{"user_id", r.session_key}};
  Json messages = Json::array();
  std::string system;
  for (const Json& m : r.messages) {
    const std::string role = m.value("role", "");
    if (role == "system") {
      system += StringContent(m["content"]);
      continue;
    }
    if (role == "tool") {
      Json block = {{"type", "tool_result"}, {"tool_use_id", m.value("tool_call_id", "")},
                    {"content", StringContent(m["content"])}};
      // Consecutive tool results travel in one user message.
      if (!messages.empty() && messages.back()["role"] == "user" && messages.back()["content"].is_array() &&
          !messages.back()["content"].empty() && messages.back()["content"].back().value("type", "") == "tool_result") {
        messages.back()["content"].push_back(std::move(block));
      } else {
        messages.push_back({{"role", "user"}, {"content", Json::array({std::move(block)})}});
      }
      continue;
    }
    if (role == "assistant") {
      Json blocks = Json::array();
      const std::string reasoning = m.value("reasoning_content", "");
      if (!reasoning.empty()) blocks.push_back({{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}});
      const std::string text = StringContent(m.value("content", Json("")));
      if (!text.empty()) blocks.push_back({{"type", "text"}, {"text", text}});
      for (const Json& call : m.value("tool_calls", Json::array())) {
        blocks.push_back({{"type", "tool_use"}, {"id", call.value("id", "")},
                          {"name", call["function"].value("name", "")}, {"input", ArgumentsObject(call)}});
      }
      if (blocks.empty()) blocks.push_back({{"type", "text"}, {"text", ""}});
      messages.push_back({{"role", "assistant"}, {"content", std::move(blocks)}});
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", StringContent(m["content"])}});
  }
  if (!system.empty()) body["system"] = system;
  body["messages"] = std::move(messages);
  if (!r.tools.empty()) {
    Json tools = Json::array();
    for (const Json& t : r.tools) {
      const Json& fn = t.contains("function") ? t["function"] : t;
      tools.push_back({{"name", fn.value("name", "")}, {"description", fn.value("description", "")},
                       {"input_schema", fn.value("parameters", Json::object())}});
    }
    body["tools"] = std::move(tools);
  }
  if (r.temperature) body["temperature"] = *r.temperature;
  if (r.thinking) {
    body["thinking"] = *r.thinking ? Json{{"type", "enabled"}, {"budget_tokens", 1024}} : Json{{"type", "disabled"}};
  }
  SetThinking(r, &body);  // llama-server reads enable_thinking only from here
  body["stream"] = true;
  return body;
}

Json RenderBody(const std::vector<Json>& messages, const Json& tools, std::optional<bool> thinking,
                bool add_generation_prompt) {
  Json body;
  body["messages"] = messages;
  if (!tools.empty()) body["tools"] = tools;
  if (thinking) body["chat_template_kwargs"] = {{"enable_thinking", *thinking}};
  body["add_generation_prompt"] = add_generation_prompt;
  return body;
}

std::vector<Json> AnthropicToOpenAIMessages(const Json& system, const Json& messages) {
  std::vector<Json> out;
  const std::string sys = StringContent(system);
  if (!sys.empty()) out.push_back({{"role", "system"}, {"content", sys}});
  for (const Json& m : messages) {
    const std::string role = m.value("role", "user");
    const Json content = m.value("content", Json(""));
    if (content.is_string()) {
      out.push_back({{"role", role}, {"content", content}});
      continue;
    }
    std::string text, reasoning;
    Json calls = Json::array();
    for (const Json& b : content) {
      const std::string t = b.value("type", "");
      if (t == "text") text += b.value("text", "");
      if (t == "thinking") reasoning += b.value("thinking", "");
      if (t == "tool_use") {
        calls.push_back({{"id", b.value("id", "")}, {"type", "function"},
                         {"function", {{"name", b.value("name", "")}, {"arguments", b.value("input", Json::object()).dump()}}}});
      }
      if (t == "tool_result") {
        if (!text.empty()) {
          out.push_back({{"role", "user"}, {"content", text}});
          text.clear();
        }
        out.push_back({{"role", "tool"}, {"tool_call_id", b.value("tool_use_id", "")},
                       {"content", StringContent(b.value("content", Json("")))}});
      }
    }
    if (role == "assistant") {
      Json msg = {{"role", "assistant"}, {"content", text}};
      if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
      if (!calls.empty()) msg["tool_calls"] = calls;
      out.push_back(std::move(msg));
    } else if (!text.empty()) {
      out.push_back({{"role", role}, {"content", text}});
    }
  }
  return out;
}

StatusOr<RecordedRequest> ReadRecordedRequest(const Json& body, std::optional<Flavor> flavor) {
  if (!body.is_object() || !body.contains("messages") || !body["messages"].is_array()) {
    return InvalidArgument("a recorded request must be a JSON object with a \"messages\" array");
  }
  for (const Json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidArgument("every message must be an object with a string \"role\"");
    }
  }
  RecordedRequest r;
  r.body = body;
  r.flavor = flavor ? *flavor : (LooksAnthropic(body) ? Flavor::kAnthropic : Flavor::kOpenAI);
  if (r.flavor == Flavor::kAnthropic) {
    r.canonical.messages = AnthropicToOpenAIMessages(body.value("system", Json("")), body["messages"]);
    for (const Json& t : body.value("tools", Json::array())) {
      r.canonical.tools.push_back({{"type", "function"},
                                   {"function", {{"name", t.value("name", "")}, {"description", t.value("description", "")},
                                                 {"parameters", t.value("input_schema", Json::object())}}}});
    }
    if (body.contains("thinking") && body["thinking"].is_object()) {
      r.canonical.thinking = body["thinking"].value("type", "") != "disabled";
    }
  } else {
    for (const Json& m : body["messages"]) r.canonical.messages.push_back(m);
    r.canonical.tools = body.value("tools", Json::array());
  }
  if (body.contains("chat_template_kwargs") && body["chat_template_kwargs"].is_object()) {
    const Json& k = body["chat_template_kwargs"];
    if (k.contains("enable_thinking") && k["enable_thinking"].is_boolean()) r.canonical.thinking = k["enable_thinking"].get<bool>();
  }
  if (body.contains("max_tokens") && body["max_tokens"].is_number_integer()) r.canonical.max_tokens = body["max_tokens"].get<int>();
  return r;
}

}  // namespace hearth::bench
