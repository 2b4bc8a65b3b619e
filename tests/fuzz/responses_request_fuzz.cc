// The Responses API request parser (src/api/responses.h) over arbitrary bytes: it reads
// every body without throwing, refuses with a 400 or returns a request that holds its
// contract, and what it returns renders as a conversation and a response.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/openai.h"
#include "api/responses.h"
#include "request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  namespace api = hearth::api;
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  auto parsed = api::responses::ParseResponsesRequest(body);
  if (!parsed.ok()) {
    hearth::fuzz::CheckRefusal(parsed.error());
    hearth::fuzz::CheckErrorBody(api::openai::ErrorJson(parsed.error()));
    return 0;
  }
  Check(parsed->generation.flavor == api::Flavor::kOpenAIResponses && !parsed->generation.messages.empty(),
        "a responses request has input");
  hearth::fuzz::CheckRequestText(parsed->generation);
  // Continuing from itself: the stored conversation feeds the next request's history.
  api::Completion reply;
  const auto stored = api::responses::StoredConversation(*parsed, {}, reply);
  api::GenerationRequest next = parsed->generation;
  next.messages = api::responses::Conversation(*parsed, stored);
  Check(next.messages.size() >= stored.size() + parsed->generation.messages.size(), "history comes before the input");
  hearth::fuzz::CheckRequestText(next);
  const auto info = api::responses::InfoFor(*parsed, "resp_x", "m", 0);
  Check(api::ParseJson(api::responses::ResponseJson(info, reply)).ok(), "the response is JSON");
  return 0;
}
