// The OpenAI request parsers (src/api/openai.h) over arbitrary bytes: both endpoints'
// parsers read every body without throwing, refuse with a 400 or return a request that
// holds their contract.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/openai.h"
#include "request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  namespace api = hearth::api;
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  auto chat = api::openai::ParseChatCompletionRequest(body);
  if (chat.ok()) {
    Check(chat->flavor == api::Flavor::kOpenAIChat && !chat->messages.empty() && !chat->prompt,
          "a chat request has messages");
    hearth::fuzz::CheckRequestText(*chat);
  } else {
    hearth::fuzz::CheckRefusal(chat.error());
    hearth::fuzz::CheckErrorBody(api::openai::ErrorJson(chat.error()));
  }

  auto completion = api::openai::ParseCompletionRequest(body);
  if (completion.ok()) {
    Check(completion->flavor == api::Flavor::kOpenAICompletion && completion->prompt && completion->messages.empty(),
          "a completion request has a prompt");
    hearth::fuzz::CheckRequestText(*completion);
  } else {
    hearth::fuzz::CheckRefusal(completion.error());
  }
  return 0;
}
