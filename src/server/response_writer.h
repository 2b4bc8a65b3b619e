// ResponseWriter: one request's output in the wire format of the API it came in on.
// Streaming responses call Begin, Delta*, then End or Fail; non-streaming ones call
// Whole or ErrorBody once. Begin gets the usage known when the engine admitted the
// request (prompt_tokens, cached_tokens, the cache report; no output yet): Anthropic's
// message_start carries it, as the real API does, so clients see reuse before the prefill.
//
// Thread safety: one writer per request, used by the HTTP thread serving it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/responses.h"
#include "api/types.h"
#include "base/status.h"

namespace hearth::server {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual std::string Begin(const api::Usage& usage) = 0;
  virtual std::string Delta(const api::Delta& delta) = 0;
  virtual std::string End(const api::Completion& completion) = 0;
  virtual std::string Fail(const api::ApiError& error) = 0;
  // Keeps idle connections open while a long prefill runs; may be empty.
  virtual std::string KeepAlive() = 0;

  virtual std::string Whole(const api::Completion& completion) = 0;
  virtual std::string ErrorBody(const api::ApiError& error) = 0;
};

// `include_usage`: OpenAI's stream_options.include_usage. kOpenAIResponses gets a fresh
// response id and echoes nothing of the request: use MakeResponsesWriter for that.
std::unique_ptr<ResponseWriter> MakeResponseWriter(api::Flavor flavor, std::string model, bool include_usage);
// A /v1/responses writer answering as `info` (its id, the request fields it echoes).
// `on_end`, if set, gets the completion and the response object as the client gets it
// (streamed: the one response.completed carries) from End or Whole, before they return
// their bytes, so before those are sent; never on an error.
using ResponsesEndCallback = std::function<void(const api::Completion&, const std::string& response_json)>;
std::unique_ptr<ResponseWriter> MakeResponsesWriter(api::responses::ResponseInfo info,
                                                    ResponsesEndCallback on_end = nullptr);

// The API error for an engine Status: 400 for bad input, 503 when busy or shutting down,
// 500 otherwise.
api::ApiError ToApiError(const Status& status);

}  // namespace hearth::server
