// The OpenAI wire format: POST /v1/chat/completions, POST /v1/completions and
// GET /v1/models, translated to and from the API-neutral structs in types.h.
//
// Pure translation: no engine, no HTTP, no clock. The caller supplies ids (ids.h) and
// timestamps, and frames bytes onto the socket.
//
// Thread safety: pure functions; call from any thread.
//
// Invariants:
//   1. Nothing here throws. A malformed or unsupported request comes back as an ApiError
//      (http_status 400, type "invalid_request_error") whose message names the field:
//      "messages[2].content must be a string or an array of content parts".
//   2. Every returned string is valid UTF-8 JSON (SSE helpers: valid SSE framing of it);
//      invalid UTF-8 from the model is replaced by U+FFFD.
//   3. Unknown request fields are ignored, so newer clients keep working; known fields
//      with the wrong type or range are refused rather than guessed at.
//
// Request mapping worth knowing:
//   - role "developer" becomes "system"; text parts of one message join with "\n".
//   - tool_calls[].function.arguments keeps the client's text verbatim (an object is
//     serialized); a tool message without `name` takes the name of the call it answers.
//   - reasoning_effort "none" sets enable_thinking = false, any other value true;
//     chat_template_kwargs.enable_thinking (a boolean) overrides it and is not repeated
//     in template_kwargs; the other kwargs are kept as JSON text.
//   - max_completion_tokens wins over max_tokens when both are sent.
//   - seed -1 means "random" (unset); other seeds outside uint32 are folded to 32 bits.
//   - top_k -1 means "disabled" (unset), as in vLLM.
//   - Refused with 400: media parts ("this model accepts text only"), n != 1,
//     logprobs, response_format json_object/json_schema, and for /v1/completions token
//     prompts, several prompts, echo, suffix and best_of > 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/parse_result.h"
#include "api/types.h"

namespace hearth::api::openai {

// POST /v1/chat/completions. On success: flavor kOpenAIChat, messages non-empty.
ParseResult<GenerationRequest> ParseChatCompletionRequest(std::string_view body);

// POST /v1/completions. On success: flavor kOpenAICompletion, prompt set, no messages.
ParseResult<GenerationRequest> ParseCompletionRequest(std::string_view body);

// "stop", "length" or "tool_calls" (kStopSequence and kCancelled report "stop").
const char* FinishReasonName(FinishReason reason);

// ---- /v1/chat/completions responses -------------------------------------------------

// The whole `chat.completion` object of a non-streaming reply.
std::string ChatCompletionJson(const Completion& completion, const std::string& id,
                               const std::string& model, int64_t created);

// One `chat.completion.chunk` carrying `delta`. `first` adds role "assistant" (the first
// chunk of a stream must carry it, even with no text).
std::string ChatChunkJson(const Delta& delta, bool first, const std::string& id,
                          const std::string& model, int64_t created);
// The chunk that closes the choice: empty delta, finish_reason set.
std::string ChatFinishChunkJson(FinishReason reason, const std::string& id,
                                const std::string& model, int64_t created);
// The usage-only chunk (choices: []) sent after the finish chunk when the request had
// stream_options.include_usage.
std::string ChatUsageChunkJson(const Usage& usage, const std::string& id,
                               const std::string& model, int64_t created);

// ---- /v1/completions responses ------------------------------------------------------

std::string TextCompletionJson(const Completion& completion, const std::string& id,
                               const std::string& model, int64_t created);
std::string TextChunkJson(std::string_view text, const std::string& id,
                          const std::string& model, int64_t created);
std::string TextFinishChunkJson(FinishReason reason, const std::string& id,
                                const std::string& model, int64_t created);
std::string TextUsageChunkJson(const Usage& usage, const std::string& id,
                               const std::string& model, int64_t created);

// ---- framing, errors, models --------------------------------------------------------

// "data: <json>\n\n". REQUIRES: json holds no newline (true of everything above).
std::string SseData(std::string_view json);
// "data: [DONE]\n\n", the last bytes of every OpenAI stream.
std::string SseDone();

// {"error":{"message","type","param","code"}}; param is null when the error names none.
// Mid-stream errors are sent as SseData(ErrorJson(e)).
std::string ErrorJson(const ApiError& error);

struct ModelInfo {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string owned_by = "hearth";
};
// GET /v1/models: {"object":"list","data":[{"id","object":"model","created","owned_by"}]}.
std::string ModelsJson(const std::vector<ModelInfo>& models);

}  // namespace hearth::api::openai
