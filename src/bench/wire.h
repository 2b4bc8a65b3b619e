// Request bodies on the wire: one OpenAI-shaped conversation (ChatRequest) turned into
// an OpenAI chat body, an Anthropic Messages body, or an /apply-template body; and
// recorded bodies of either shape read back into a ChatRequest (replay).
//
// The OpenAI shape is the canonical one: new tokens are always counted by rendering the
// OpenAI-shaped equivalent, whichever API the request went out on.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/usage.h"
#include "bench/workload.h"

namespace hearth::bench {

struct ChatRequest {
  std::vector<Json> messages;  // OpenAI chat messages
  Json tools = Json::array();  // OpenAI tools; empty when none
  std::optional<bool> thinking;  // unset: the template's default
  int max_tokens = 48;
  std::optional<double> temperature;
  // Names the conversation, as Codex (prompt_cache_key) and Claude Code (metadata.user_id)
  // do, so a load balancer can keep it on one server. Empty: not sent.
  std::string session_key;
};

// A streaming request body with usage in the stream. `model` may be empty.
Json OpenAIBody(const ChatRequest& r, const std::string& model);
Json AnthropicBody(const ChatRequest& r, const std::string& model);
// The body for POST /apply-template (OpenAI shape plus add_generation_prompt).
Json RenderBody(const std::vector<Json>& messages, const Json& tools, std::optional<bool> thinking,
                bool add_generation_prompt);

// A recorded body, either shape (Anthropic when it has a top-level "system", or any
// content block of type tool_use / tool_result / thinking, or `anthropic` is set).
struct RecordedRequest {
  Flavor flavor = Flavor::kOpenAI;
  Json body;             // as recorded
  ChatRequest canonical;  // its OpenAI-shaped equivalent
};
// Errors: kInvalidArgument when the body is not an object with a messages array.
StatusOr<RecordedRequest> ReadRecordedRequest(const Json& body, std::optional<Flavor> flavor);

// Converts Anthropic messages (and system) to OpenAI chat messages.
std::vector<Json> AnthropicToOpenAIMessages(const Json& system, const Json& messages);

}  // namespace hearth::bench
