// Response shaping for the Responses API: the response object and its stream events.
#include "api/ids.h"
#include "api/json_fields.h"
#include "api/responses.h"

namespace hearth::api::responses {
namespace {

Json OptionalJson(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }
Json OptionalJson(const std::optional<float>& v) { return v ? Json(*v) : Json(nullptr); }
Json OptionalJson(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

Json UsageJson(const Usage& u) {
  Json j;
  j["input_tokens"] = u.prompt_tokens;
  j["input_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  j["output_tokens"] = u.completion_tokens;
  j["output_tokens_details"] = {{"reasoning_tokens", 0}};
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  if (u.cache) j["hearth_cache"] = CacheReportJson(*u.cache);
  return j;
}

Json ToolChoiceJson(const std::string& choice) {
  if (choice == "auto" || choice == "none" || choice == "required") return choice;
  return {{"type", "function"}, {"name", choice}};
}

Json ToolsJson(const std::vector<Tool>& tools) {
  Json out = Json::array();
  for (const Tool& t : tools) {
    ParseResult<Json> params = ParseJson(t.parameters);
    out.push_back({{"type", "function"},
                   {"name", t.name},
                   {"description", t.description},
                   {"parameters", params.ok() ? std::move(params).value() : Json::object()},
                   {"strict", false}});
  }
  return out;
}

// The response object; `status` "in_progress" while streaming, output and usage then empty.
Json ResponseObject(const ResponseInfo& info, const char* status, Json output, const Usage* usage) {
  Json j;
  j["id"] = info.id;
  j["object"] = "response";
  j["created_at"] = info.created_at;
  j["status"] = status;
  j["error"] = nullptr;
  j["incomplete_details"] = std::string(status) == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  j["instructions"] = OptionalJson(info.instructions);
  j["max_output_tokens"] = OptionalJson(info.max_output_tokens);
  j["model"] = info.model;
  j["output"] = std::move(output);
  j["parallel_tool_calls"] = info.parallel_tool_calls;
  j["previous_response_id"] = OptionalJson(info.previous_response_id);
  j["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  j["store"] = info.store;
  j["temperature"] = OptionalJson(info.temperature);
  j["text"] = {{"format", {{"type", "text"}}}};
  j["tool_choice"] = ToolChoiceJson(info.tool_choice);
  j["tools"] = ToolsJson(info.tools);
  j["top_p"] = OptionalJson(info.top_p);
  j["truncation"] = "disabled";
  j["usage"] = usage != nullptr ? UsageJson(*usage) : Json(nullptr);
  j["metadata"] = Json::object();
  return j;
}

const char* StatusFor(FinishReason reason) {
  return reason == FinishReason::kLength ? "incomplete" : "completed";
}

Json ReasoningPart(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }
Json TextPart(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
}

Json ReasoningItem(const std::string& id, const std::string& text, const char* status) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", Json::array()},
          {"content", text.empty() ? Json::array() : Json::array({ReasoningPart(text)})},
          {"status", status}};
}
Json MessageItem(const std::string& id, const std::string& text, const char* status, bool with_part) {
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", with_part ? Json::array({TextPart(text)}) : Json::array()}};
}
Json FunctionCallItem(const std::string& id, const std::string& call_id, const std::string& name,
                      const std::string& arguments, const char* status) {
  return {{"id", id},       {"type", "function_call"}, {"status", status},
          {"call_id", call_id}, {"name", name},        {"arguments", arguments}};
}

std::string CallId(const std::string& id) { return id.empty() ? NewId("call_") : id; }

std::string EventText(const char* type, Json data, int64_t sequence) {
  Json j;
  j["type"] = type;
  j["sequence_number"] = sequence;
  for (auto& [key, value] : data.items()) j[key] = std::move(value);
  std::string out = "event: ";
  out += type;
  out += "\ndata: ";
  out += DumpJson(j);
  out += "\n\n";
  return out;
}

}  // namespace

std::string ResponseJson(const ResponseInfo& info, const Completion& c) {
  Json output = Json::array();
  if (!c.reasoning.empty()) output.push_back(ReasoningItem(NewId("rs_"), c.reasoning, "completed"));
  if (!c.content.empty() || (output.empty() && c.tool_calls.empty())) {  // the stream's rule too
    output.push_back(MessageItem(NewId("msg_"), c.content, "completed", true));
  }
  for (const ToolCall& call : c.tool_calls) {
    output.push_back(FunctionCallItem(NewId("fc_"), CallId(call.id), call.name, call.arguments, "completed"));
  }
  return DumpJson(ResponseObject(info, StatusFor(c.finish_reason), std::move(output), &c.usage));
}

ApiError ResponseNotFound(const std::string& id) {
  return {404, "invalid_request_error", "Response with id '" + id + "' not found.", ""};
}

std::string DeletedJson(const std::string& id) {
  return DumpJson(Json{{"id", id}, {"object", "response"}, {"deleted", true}});
}

// ---- StreamEncoder ------------------------------------------------------------------

std::string StreamEncoder::Start(const ResponseInfo& info) {
  info_ = info;
  std::string out = EventText("response.created", {{"response", ResponseObject(info_, "in_progress", Json::array(), nullptr)}},
                              sequence_++);
  out += EventText("response.in_progress", {{"response", ResponseObject(info_, "in_progress", Json::array(), nullptr)}},
                   sequence_++);
  return out;
}

void StreamEncoder::Open(Kind kind, const Delta::ToolCallDelta* call, std::string* out) {
  Close(out);
  Item item;
  item.kind = kind;
  Json added;
  const int index = static_cast<int>(items_.size());
  switch (kind) {
    case Kind::kReasoning:
      item.id = NewId("rs_");
      added = ReasoningItem(item.id, "", "in_progress");
      break;
    case Kind::kMessage:
      item.id = NewId("msg_");
      added = MessageItem(item.id, "", "in_progress", false);
      break;
    case Kind::kFunctionCall:
      item.id = NewId("fc_");
      item.call_id = CallId(call->id);
      item.name = call->name;
      item.tool_index = call->index;
      added = FunctionCallItem(item.id, item.call_id, item.name, "", "in_progress");
      break;
  }
  *out += EventText("response.output_item.added", {{"output_index", index}, {"item", std::move(added)}}, sequence_++);
  if (kind != Kind::kFunctionCall) {
    *out += EventText("response.content_part.added",
                      {{"item_id", item.id},
                       {"output_index", index},
                       {"content_index", 0},
                       {"part", kind == Kind::kReasoning ? ReasoningPart("") : TextPart("")}},
                      sequence_++);
  }
  items_.push_back(std::move(item));
  open_ = true;
}

void StreamEncoder::Close(std::string* out) {
  if (!open_) return;
  open_ = false;
  const Item& item = items_.back();
  const int index = static_cast<int>(items_.size()) - 1;
  Json done;
  switch (item.kind) {
    case Kind::kReasoning:
      *out += EventText("response.reasoning_text.done",
                        {{"item_id", item.id}, {"output_index", index}, {"content_index", 0}, {"text", item.text}},
                        sequence_++);
      *out += EventText("response.content_part.done",
                        {{"item_id", item.id}, {"output_index", index}, {"content_index", 0}, {"part", ReasoningPart(item.text)}},
                        sequence_++);
      done = ReasoningItem(item.id, item.text, "completed");
      break;
    case Kind::kMessage:
      *out += EventText("response.output_text.done",
                        {{"item_id", item.id},
                         {"output_index", index},
                         {"content_index", 0},
                         {"text", item.text},
                         {"logprobs", Json::array()}},
                        sequence_++);
      *out += EventText("response.content_part.done",
                        {{"item_id", item.id}, {"output_index", index}, {"content_index", 0}, {"part", TextPart(item.text)}},
                        sequence_++);
      done = MessageItem(item.id, item.text, "completed", true);
      break;
    case Kind::kFunctionCall:
      *out += EventText("response.function_call_arguments.done",
                        {{"item_id", item.id}, {"output_index", index}, {"name", item.name}, {"arguments", item.text}},
                        sequence_++);
      done = FunctionCallItem(item.id, item.call_id, item.name, item.text, "completed");
      break;
  }
  *out += EventText("response.output_item.done", {{"output_index", index}, {"item", std::move(done)}}, sequence_++);
}

std::string StreamEncoder::Push(const Delta& delta) {
  std::string out;
  auto emit = [&](const char* type, const std::string& piece) {
    Item& item = items_.back();
    item.text += piece;
    Json data = {{"item_id", item.id}, {"output_index", static_cast<int>(items_.size()) - 1}};
    if (item.kind != Kind::kFunctionCall) data["content_index"] = 0;
    data["delta"] = piece;
    if (item.kind == Kind::kMessage) data["logprobs"] = Json::array();
    out += EventText(type, std::move(data), sequence_++);
  };
  auto is_open = [&](Kind kind) { return open_ && items_.back().kind == kind; };
  if (!delta.reasoning.empty()) {
    if (!is_open(Kind::kReasoning)) Open(Kind::kReasoning, nullptr, &out);
    emit("response.reasoning_text.delta", delta.reasoning);
  }
  if (!delta.content.empty()) {
    if (!is_open(Kind::kMessage)) Open(Kind::kMessage, nullptr, &out);
    emit("response.output_text.delta", delta.content);
  }
  for (const Delta::ToolCallDelta& call : delta.tool_calls) {
    if (!is_open(Kind::kFunctionCall) || items_.back().tool_index != call.index) {
      Open(Kind::kFunctionCall, &call, &out);
    }
    if (!call.arguments.empty()) emit("response.function_call_arguments.delta", call.arguments);
  }
  return out;
}

std::string StreamEncoder::Finish(const Completion& completion) {
  std::string out;
  Close(&out);
  // A reply with no output at all still has its (empty) message, as the whole response does.
  if (items_.empty()) {
    Open(Kind::kMessage, nullptr, &out);
    Close(&out);
  }
  Json output = Json::array();
  for (const Item& item : items_) {
    switch (item.kind) {
      case Kind::kReasoning: output.push_back(ReasoningItem(item.id, item.text, "completed")); break;
      case Kind::kMessage: output.push_back(MessageItem(item.id, item.text, "completed", true)); break;
      case Kind::kFunctionCall:
        output.push_back(FunctionCallItem(item.id, item.call_id, item.name, item.text, "completed"));
        break;
    }
  }
  const char* status = StatusFor(completion.finish_reason);
  const char* type = std::string(status) == "incomplete" ? "response.incomplete" : "response.completed";
  Json response = ResponseObject(info_, status, std::move(output), &completion.usage);
  response_json_ = DumpJson(response);
  out += EventText(type, {{"response", std::move(response)}}, sequence_++);
  return out;
}

std::string StreamEncoder::Error(const ApiError& error) {
  const std::string code = error.type.empty() ? "api_error" : error.type;
  std::string out = EventText("error",
                              {{"code", code},
                               {"message", error.message},
                               {"param", error.param.empty() ? Json(nullptr) : Json(error.param)}},
                              sequence_++);
  Json response = ResponseObject(info_, "failed", Json::array(), nullptr);
  response["error"] = {{"code", code}, {"message", error.message}};
  out += EventText("response.failed", {{"response", std::move(response)}}, sequence_++);
  return out;
}

}  // namespace hearth::api::responses
