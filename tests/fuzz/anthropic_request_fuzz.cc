// The Anthropic request parsers (src/api/anthropic.h) over arbitrary bytes: /v1/messages
// and count_tokens read every body without throwing, refuse with a 400 or return a
// request that holds their contract.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/anthropic.h"
#include "request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  namespace api = hearth::api;
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  auto messages = api::anthropic::ParseMessagesRequest(body);
  if (messages.ok()) {
    Check(messages->flavor == api::Flavor::kAnthropic && !messages->messages.empty() && messages->max_tokens,
          "a messages request has messages and max_tokens");
    hearth::fuzz::CheckRequestText(*messages);
  } else {
    hearth::fuzz::CheckRefusal(messages.error());
    hearth::fuzz::CheckErrorBody(api::anthropic::ErrorJson(messages.error()));
  }

  auto count = api::anthropic::ParseCountTokensRequest(body);
  if (count.ok()) {
    Check(count->flavor == api::Flavor::kAnthropic && !count->messages.empty(), "a count_tokens request has messages");
    hearth::fuzz::CheckRequestText(*count);
  } else {
    hearth::fuzz::CheckRefusal(count.error());
  }
  return 0;
}
