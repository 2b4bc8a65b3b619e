// OpenAI's Responses API wire format: POST /v1/responses, translated to and from the
// API-neutral structs in types.h, as the official SDKs and Codex CLI use it.
//
// Pure translation: no engine, no HTTP, no clock, no storage. The caller keeps earlier
// responses (previous_response_id), supplies ids (ids.h) and timestamps, and frames bytes
// onto the socket.
//
// Thread safety: the functions are pure; a StreamEncoder belongs to one stream and is
// used by one thread at a time.
//
// Invariants:
//   1. Nothing here throws. A malformed or unsupported request comes back as an ApiError
//      (400, "invalid_request_error") naming the field: "input[2].call_id is required".
//      Errors use OpenAI's shape (openai::ErrorJson).
//   2. Every returned string is valid UTF-8 JSON (invalid model bytes become U+FFFD).
//   3. Unknown request fields are ignored; known ones hearth has no use for (metadata,
//      include, store's server-side retention, truncation, user, safety_identifier,
//      service_tier, reasoning.summary) are accepted and not acted on.
//
// Request mapping worth knowing:
//   - `input` as a string is one user message. As items: a message item (`type`
//     "message" or absent) with role user/system/developer/assistant and content as a
//     string or input_text / output_text parts (joined with "\n"); developer becomes
//     system. A run of assistant-side items (reasoning, assistant messages,
//     function_call) with nothing else between them is one assistant turn: reasoning
//     texts (reasoning_text content, else summary_text) join into reasoning_content,
//     message texts into content, function calls into tool_calls (call_id is the tool
//     call id; arguments kept verbatim). function_call_output is a "tool" message
//     answering call_id (its output a string or input_text parts).
//   - `instructions` is a leading system message. It is not carried over by
//     previous_response_id, as OpenAI documents.
//   - tools: {"type":"function", name, description, parameters, strict}, also inside a
//     {"type":"namespace", tools: [...]} group (declared by their own names); other tool
//     types (web_search, file_search, custom, ...) are dropped: Codex sends them always
//     and a local model cannot run them. tool_choice "auto" | "none" | "required" |
//     {"type":"function","name"}.
//   - max_output_tokens is max_tokens; reasoning.effort "none" sets enable_thinking =
//     false, another effort true. `stop` (a string or strings, as in chat) is not
//     OpenAI's: llama-server's /v1/responses takes it, and so does this one.
//   - Refused with 400: media parts (input_image, input_file, input_audio), item types
//     other than the four above (item_reference, hosted tool calls), background: true,
//     conversation, text.format other than "text", top_logprobs > 0.
//
// Response mapping: output items in the order the model produced them: a reasoning item
// (content [{type:"reasoning_text"}], summary []), a message item (one output_text part),
// one function_call item per tool call (call_id = the tool call id). Status "completed",
// or "incomplete" with incomplete_details.reason "max_output_tokens" when the length
// limit ended it. usage: input_tokens, input_tokens_details.cached_tokens, output_tokens,
// output_tokens_details.reasoning_tokens (not counted apart: 0), total_tokens,
// hearth_cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/parse_result.h"
#include "api/types.h"

namespace hearth::api::responses {

struct ResponsesRequest {
  // flavor kOpenAIResponses; messages: the `input` items alone (no instructions, nothing
  // from previous_response_id: see Conversation).
  GenerationRequest generation;
  std::optional<std::string> instructions;
  std::optional<std::string> previous_response_id;
  bool store = true;  // false: the response is not kept for a later previous_response_id
};

// POST /v1/responses. On success generation.messages is non-empty.
ParseResult<ResponsesRequest> ParseResponsesRequest(std::string_view body);

// The messages the model sees: the instructions (as a system message), then `history`
// (what previous_response_id names: its conversation, see StoredConversation), then the
// request's input. A tool message whose call is named in history or input gets that
// call's function name.
std::vector<Message> Conversation(const ResponsesRequest& request, const std::vector<Message>& history);

// What a later request naming this response continues from: `history`, the request's
// input and the reply as an assistant message (instructions left out).
std::vector<Message> StoredConversation(const ResponsesRequest& request, const std::vector<Message>& history,
                                        const Completion& reply);

// What the response object repeats of its request, and its identity.
struct ResponseInfo {
  std::string id;  // "resp_..."
  std::string model;
  int64_t created_at = 0;  // unix seconds
  std::optional<std::string> instructions;
  std::optional<std::string> previous_response_id;
  std::vector<Tool> tools;
  std::string tool_choice = "auto";
  bool parallel_tool_calls = true;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> max_output_tokens;
  bool store = true;
};

// The info for `request`, answered under `id` by `model`.
ResponseInfo InfoFor(const ResponsesRequest& request, std::string id, std::string model, int64_t created_at);

// The whole `response` object of a non-streaming reply. Item ids are fresh ("rs_",
// "msg_", "fc_").
std::string ResponseJson(const ResponseInfo& info, const Completion& completion);

// GET or DELETE /v1/responses/{id} for an id this server does not hold: 404, in OpenAI's
// words ("Response with id '...' not found.").
ApiError ResponseNotFound(const std::string& id);
// DELETE /v1/responses/{id}'s answer: {"id", "object": "response", "deleted": true}.
std::string DeletedJson(const std::string& id);

// Turns a stream of Deltas into the Responses API's server-sent events, each
// "event: <type>\ndata: <json>\n\n" with sequence_number counting from 0.
//
// Start sends response.created and response.in_progress. Output items open and close as
// the kind of output changes (reasoning -> reasoning item, content -> message item, each
// tool call -> its own function_call item), numbered by output_index in the order they
// open; at most one is open at a time. Each item goes output_item.added, its content part
// (content_part.added / .done; none for function calls), its deltas and their .done
// event, then output_item.done. Finish closes the open item and sends response.completed
// (or response.incomplete) with every item as streamed and the usage.
//
// REQUIRES: calls in the order Start, Push*, then Finish or Error.
// REQUIRES: tool call deltas for one index are contiguous, as llama.cpp's output parsers
// produce them.
class StreamEncoder {
 public:
  std::string Start(const ResponseInfo& info);
  std::string Push(const Delta& delta);
  // Only completion.finish_reason and usage are read: the output went out through Push.
  std::string Finish(const Completion& completion);
  // After Finish: the response object its last event carried (what ResponseJson is to a
  // whole reply, with the item ids as streamed). Empty before.
  const std::string& response_json() const { return response_json_; }
  // An `error` event, then response.failed.
  std::string Error(const ApiError& error);

 private:
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  struct Item {
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;     // reasoning or message text, or the call's arguments
    std::string call_id;  // function calls
    std::string name;     // function calls
    int tool_index = 0;   // the Delta index of a function call
  };

  void Open(Kind kind, const Delta::ToolCallDelta* call, std::string* out);
  void Close(std::string* out);

  ResponseInfo info_;
  int64_t sequence_ = 0;
  std::vector<Item> items_;  // every item opened so far; the last one is open if open_
  bool open_ = false;
  std::string response_json_;
};

}  // namespace hearth::api::responses
