// Response shaping for the Anthropic Messages API: the message object, stream events,
// errors.
#include <algorithm>

#include "api/anthropic.h"
#include "api/ids.h"
#include "api/json_fields.h"

namespace hearth::api::anthropic {
namespace {

// Anthropic splits the prompt in three, which add up to it: cache reads (reused), cache
// writes (prefilled and kept as a state a later request can resume through) and
// input_tokens (prefilled and not kept).
Json UsageJson(const Usage& u) {
  Json j;
  j["input_tokens"] = std::max(0, u.prompt_tokens - u.cached_tokens - u.cache_written_tokens);
  j["cache_creation_input_tokens"] = u.cache_written_tokens;
  j["cache_read_input_tokens"] = u.cached_tokens;
  j["output_tokens"] = u.completion_tokens;
  if (u.cache) j["hearth_cache"] = CacheReportJson(*u.cache);
  return j;
}

Json StopSequenceJson(const Completion& c) {
  if (c.finish_reason != FinishReason::kStopSequence) return nullptr;
  return c.stop_sequence;
}

std::string ToolUseId(const std::string& id) { return id.empty() ? NewId("toolu_") : id; }

// A tool call's arguments as the `input` object; {} when they are not a JSON object
// (a model that wrote broken JSON), since `input` may hold nothing else.
Json InputJson(const std::string& arguments) {
  ParseResult<Json> parsed = ParseJson(arguments);
  if (parsed.ok() && parsed->is_object()) return std::move(parsed).value();
  return Json::object();
}

std::string Event(const char* type, const Json& data) {
  std::string out = "event: ";
  out += type;
  out += "\ndata: ";
  out += DumpJson(data);
  out += "\n\n";
  return out;
}

Json ErrorBody(const ApiError& error) {
  Json j;
  j["type"] = "error";
  j["error"] = {{"type", error.type.empty() ? "api_error" : error.type},
                {"message", error.message}};
  return j;
}

}  // namespace

const char* StopReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kToolCalls:
      return "tool_use";
    case FinishReason::kStopSequence:
      return "stop_sequence";
    case FinishReason::kStop:
    case FinishReason::kCancelled:
      break;
  }
  return "end_turn";
}

std::string MessageJson(const Completion& completion, const std::string& id,
                        const std::string& model) {
  Json content = Json::array();
  if (!completion.reasoning.empty()) {
    content.push_back(
        {{"type", "thinking"}, {"thinking", completion.reasoning}, {"signature", ""}});
  }
  if (!completion.content.empty()) {
    content.push_back({{"type", "text"}, {"text", completion.content}});
  }
  for (const ToolCall& call : completion.tool_calls) {
    content.push_back({{"type", "tool_use"},
                       {"id", ToolUseId(call.id)},
                       {"name", call.name},
                       {"input", InputJson(call.arguments)}});
  }
  Json j;
  j["id"] = id;
  j["type"] = "message";
  j["role"] = "assistant";
  j["model"] = model;
  j["content"] = std::move(content);
  j["stop_reason"] = StopReasonName(completion.finish_reason);
  j["stop_sequence"] = StopSequenceJson(completion);
  j["usage"] = UsageJson(completion.usage);
  return DumpJson(j);
}

std::string CountTokensJson(int input_tokens) {
  Json j;
  j["input_tokens"] = input_tokens;
  return DumpJson(j);
}

std::string ErrorJson(const ApiError& error) { return DumpJson(ErrorBody(error)); }

// ---- StreamEncoder ------------------------------------------------------------------

std::string StreamEncoder::Start(const std::string& id, const std::string& model,
                                 const Usage& usage) {
  Json message;
  message["id"] = id;
  message["type"] = "message";
  message["role"] = "assistant";
  message["model"] = model;
  message["content"] = Json::array();
  message["stop_reason"] = nullptr;
  message["stop_sequence"] = nullptr;
  message["usage"] = UsageJson(usage);
  return Event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
}

void StreamEncoder::CloseBlock(std::string* out) {
  if (open_ == Block::kNone) return;
  const int index = n_blocks_opened_ - 1;
  if (open_ == Block::kThinking) {
    // Anthropic signs thinking so it can verify it when sent back; hearth has nothing
    // to verify, and clients accept the empty signature.
    *out += Event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", index},
                   {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
  }
  *out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  open_ = Block::kNone;
  open_tool_index_.reset();
}

void StreamEncoder::OpenBlock(Block kind, const Delta::ToolCallDelta* call, std::string* out) {
  CloseBlock(out);
  Json block;
  switch (kind) {
    case Block::kThinking:
      block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      break;
    case Block::kText:
      block = {{"type", "text"}, {"text", ""}};
      break;
    case Block::kToolUse:
      block = {{"type", "tool_use"},
               {"id", ToolUseId(call->id)},
               {"name", call->name},
               {"input", Json::object()}};
      open_tool_index_ = call->index;
      break;
    case Block::kNone:
      return;
  }
  *out += Event("content_block_start", {{"type", "content_block_start"},
                                        {"index", n_blocks_opened_},
                                        {"content_block", std::move(block)}});
  open_ = kind;
  ++n_blocks_opened_;
}

std::string StreamEncoder::Push(const Delta& delta) {
  std::string out;
  auto emit = [&](Json d) {
    out += Event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", n_blocks_opened_ - 1},
                                         {"delta", std::move(d)}});
  };
  if (!delta.reasoning.empty()) {
    if (open_ != Block::kThinking) OpenBlock(Block::kThinking, nullptr, &out);
    emit({{"type", "thinking_delta"}, {"thinking", delta.reasoning}});
  }
  if (!delta.content.empty()) {
    if (open_ != Block::kText) OpenBlock(Block::kText, nullptr, &out);
    emit({{"type", "text_delta"}, {"text", delta.content}});
  }
  for (const Delta::ToolCallDelta& call : delta.tool_calls) {
    if (open_ != Block::kToolUse || open_tool_index_ != call.index) {
      OpenBlock(Block::kToolUse, &call, &out);
    }
    if (!call.arguments.empty()) {
      emit({{"type", "input_json_delta"}, {"partial_json", call.arguments}});
    }
  }
  return out;
}

std::string StreamEncoder::Finish(const Completion& completion) {
  std::string out;
  CloseBlock(&out);
  Json delta;
  delta["stop_reason"] = StopReasonName(completion.finish_reason);
  delta["stop_sequence"] = StopSequenceJson(completion);
  out += Event("message_delta", {{"type", "message_delta"},
                                 {"delta", std::move(delta)},
                                 {"usage", UsageJson(completion.usage)}});
  out += Event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string StreamEncoder::Error(const ApiError& error) {
  return Event("error", ErrorBody(error));
}

std::string StreamEncoder::Ping() { return Event("ping", {{"type", "ping"}}); }

}  // namespace hearth::api::anthropic
