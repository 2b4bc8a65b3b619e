// Response shaping for the OpenAI API: whole objects, stream chunks, errors, models.
#include "api/json_fields.h"
#include "api/openai.h"

namespace hearth::api::openai {
namespace {

Json Header(const char* object, const std::string& id, const std::string& model,
                   int64_t created) {
  Json j;
  j["id"] = id;
  j["object"] = object;
  j["created"] = created;
  j["model"] = model;
  return j;
}

Json UsageJson(const Usage& u) {
  Json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  if (u.cache) j["hearth_cache"] = CacheReportJson(*u.cache);
  return j;
}

Json ToolCallJson(const std::string& id, const std::string& name,
                         const std::string& arguments) {
  Json j;
  j["id"] = id;
  j["type"] = "function";
  j["function"] = {{"name", name}, {"arguments", arguments}};
  return j;
}

Json ChatChoice(Json delta_or_message, const char* key,
                       const char* finish_reason) {
  Json choice;
  choice["index"] = 0;
  choice[key] = std::move(delta_or_message);
  choice["logprobs"] = nullptr;
  if (finish_reason != nullptr) {
    choice["finish_reason"] = finish_reason;
  } else {
    choice["finish_reason"] = nullptr;
  }
  return choice;
}

Json TextChoice(std::string_view text, const char* finish_reason) {
  Json choice;
  choice["text"] = std::string(text);
  choice["index"] = 0;
  choice["logprobs"] = nullptr;
  if (finish_reason != nullptr) {
    choice["finish_reason"] = finish_reason;
  } else {
    choice["finish_reason"] = nullptr;
  }
  return choice;
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kStop:
    case FinishReason::kStopSequence:
    case FinishReason::kCancelled:
      break;
  }
  return "stop";
}

std::string ChatCompletionJson(const Completion& completion, const std::string& id,
                               const std::string& model, int64_t created) {
  Json message;
  message["role"] = "assistant";
  // OpenAI sends null, not "", when the turn is only tool calls; some clients check.
  if (completion.content.empty() && !completion.tool_calls.empty()) {
    message["content"] = nullptr;
  } else {
    message["content"] = completion.content;
  }
  if (!completion.reasoning.empty()) message["reasoning_content"] = completion.reasoning;
  if (!completion.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : completion.tool_calls) {
      calls.push_back(ToolCallJson(c.id, c.name, c.arguments));
    }
    message["tool_calls"] = std::move(calls);
  }
  Json j = Header("chat.completion", id, model, created);
  j["choices"] = Json::array(
      {ChatChoice(std::move(message), "message", FinishReasonName(completion.finish_reason))});
  j["usage"] = UsageJson(completion.usage);
  return DumpJson(j);
}

std::string ChatChunkJson(const Delta& delta, bool first, const std::string& id,
                          const std::string& model, int64_t created) {
  Json d = Json::object();
  if (first) {
    d["role"] = "assistant";
    d["content"] = delta.content;
  } else if (!delta.content.empty()) {
    d["content"] = delta.content;
  }
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.tool_calls.empty()) {
    Json calls = Json::array();
    for (const Delta::ToolCallDelta& c : delta.tool_calls) {
      Json call;
      call["index"] = c.index;
      // Only the first delta of a call names it; later ones carry argument text alone.
      if (!c.id.empty()) {
        call["id"] = c.id;
        call["type"] = "function";
      }
      Json fn = Json::object();
      if (!c.name.empty()) fn["name"] = c.name;
      fn["arguments"] = c.arguments;
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    d["tool_calls"] = std::move(calls);
  }
  Json j = Header("chat.completion.chunk", id, model, created);
  j["choices"] = Json::array({ChatChoice(std::move(d), "delta", nullptr)});
  return DumpJson(j);
}

std::string ChatFinishChunkJson(FinishReason reason, const std::string& id,
                                const std::string& model, int64_t created) {
  Json j = Header("chat.completion.chunk", id, model, created);
  j["choices"] = Json::array(
      {ChatChoice(Json::object(), "delta", FinishReasonName(reason))});
  return DumpJson(j);
}

std::string ChatUsageChunkJson(const Usage& usage, const std::string& id,
                               const std::string& model, int64_t created) {
  Json j = Header("chat.completion.chunk", id, model, created);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage);
  return DumpJson(j);
}

std::string TextCompletionJson(const Completion& completion, const std::string& id,
                               const std::string& model, int64_t created) {
  Json j = Header("text_completion", id, model, created);
  j["choices"] = Json::array(
      {TextChoice(completion.content, FinishReasonName(completion.finish_reason))});
  j["usage"] = UsageJson(completion.usage);
  return DumpJson(j);
}

std::string TextChunkJson(std::string_view text, const std::string& id,
                          const std::string& model, int64_t created) {
  Json j = Header("text_completion", id, model, created);
  j["choices"] = Json::array({TextChoice(text, nullptr)});
  return DumpJson(j);
}

std::string TextFinishChunkJson(FinishReason reason, const std::string& id,
                                const std::string& model, int64_t created) {
  Json j = Header("text_completion", id, model, created);
  j["choices"] = Json::array({TextChoice("", FinishReasonName(reason))});
  return DumpJson(j);
}

std::string TextUsageChunkJson(const Usage& usage, const std::string& id,
                               const std::string& model, int64_t created) {
  Json j = Header("text_completion", id, model, created);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage);
  return DumpJson(j);
}

std::string SseData(std::string_view json) {
  std::string out = "data: ";
  out += json;
  out += "\n\n";
  return out;
}

std::string SseDone() { return "data: [DONE]\n\n"; }

std::string ErrorJson(const ApiError& error) {
  Json e;
  e["message"] = error.message;
  e["type"] = error.type.empty() ? "api_error" : error.type;
  if (error.param.empty()) {
    e["param"] = nullptr;
  } else {
    e["param"] = error.param;
  }
  e["code"] = nullptr;
  Json j;
  j["error"] = std::move(e);
  return DumpJson(j);
}

std::string ModelsJson(const std::vector<ModelInfo>& models) {
  Json data = Json::array();
  for (const ModelInfo& m : models) {
    Json entry;
    entry["id"] = m.id;
    entry["object"] = "model";
    entry["created"] = m.created;
    entry["owned_by"] = m.owned_by;
    data.push_back(std::move(entry));
  }
  Json j;
  j["object"] = "list";
  j["data"] = std::move(data);
  return DumpJson(j);
}

}  // namespace hearth::api::openai
