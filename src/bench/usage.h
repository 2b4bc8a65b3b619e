// Reading what a server reports about a request: its streamed output and its usage
// fields, whichever of the known shapes it uses.
//
// Reused ("cached") prompt tokens come from, in this order of preference:
//  1. llama-server's `timings`: cache_n reused, prompt_n prefilled;
//  2. OpenAI `usage.prompt_tokens_details.cached_tokens` (hearth, vLLM, SGLang, llama-server),
//     or DeepSeek-style `usage.prompt_cache_hit_tokens`;
//  3. Anthropic `usage.cache_read_input_tokens` (prompt = input + cache read + cache creation).
// A server that gives none of these (mlx-style) leaves `reused` unset: "unknown", never 0.
// Where the reuse came from is hearth's alone: `usage.hearth_cache.tier` ("device", "ram",
// "disk"; null when nothing was reused) and `stopped_because`; others leave both empty.
//
// Thread safety: plain values; a StreamReader belongs to one request.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bench/workload.h"

namespace hearth::bench {

enum class Flavor { kOpenAI, kAnthropic };

struct Usage {
  std::optional<int> prompt_tokens;
  std::optional<int> reused_tokens;
  std::optional<int> completion_tokens;
  std::optional<double> prefill_ms;  // the server's own prefill time, where it reports one
  std::string source;                // "timings", "openai", "anthropic", or "none"
  std::string cache_tier;            // usage.hearth_cache.tier; empty when not reported
  std::string stopped_because;       // usage.hearth_cache.stopped_because
};

// Collects usage fields from every object a response consists of (a whole response, or
// each stream chunk / event), later values overriding earlier ones.
class UsageCollector {
 public:
  void Add(const Json& object);
  Usage Result() const;

 private:
  std::optional<int> timings_cache_n_, timings_prompt_n_;
  std::optional<double> timings_prompt_ms_;
  std::optional<int> oa_prompt_, oa_cached_, oa_completion_;
  std::optional<int> an_input_, an_cache_read_, an_cache_creation_, an_output_;
  std::string cache_tier_, stopped_because_;
};

// Parses a Server-Sent Events stream of chat output (OpenAI chat chunks or Anthropic
// message events) as bytes arrive.
class StreamReader {
 public:
  explicit StreamReader(Flavor flavor) : flavor_(flavor) {}

  // Feeds raw bytes. Returns how many pieces of generated output (content, reasoning or
  // tool-call text) the complete events among them carried.
  int Feed(std::string_view bytes);

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  int n_pieces() const { return n_pieces_; }
  bool done() const { return done_; }
  // The first error the stream carried (an error event or an error object).
  const std::optional<std::string>& error() const { return error_; }
  Usage usage() const { return usage_.Result(); }

 private:
  int HandleEvent(std::string_view event_name, std::string_view data);
  int HandleOpenAI(const Json& j);
  int HandleAnthropic(const Json& j);

  Flavor flavor_;
  std::string buffer_;
  std::string content_, reasoning_;
  int n_pieces_ = 0;
  bool done_ = false;
  std::optional<std::string> error_;
  UsageCollector usage_;
};

// The message of an error response body in either API's shape, or the body itself.
std::string ErrorMessage(std::string_view body);

}  // namespace hearth::bench
