// The API-neutral shape of a generation request and of what comes back, shared by the
// OpenAI and Anthropic front ends (openai.h, anthropic.h) and the server core.
//
// No engine types and no JSON here: the front ends translate their wire format to and
// from these structs, and the server core translates these to engine calls.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hearth::api {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

struct Message {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;  // role "tool"
  std::string tool_name;     // role "tool", when known
};

struct Tool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON schema text
};

struct Sampling {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<uint32_t> seed;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<float> repetition_penalty;
};

enum class Flavor { kOpenAIChat, kOpenAICompletion, kOpenAIResponses, kAnthropic };

// A client's wish to keep the prompt cached through the end of one message (Anthropic
// cache_control on a block of it; on tools or system: the system turn, message 0).
struct CacheBreakpoint {
  int message = 0;         // index into GenerationRequest::messages
  int ttl_seconds = 300;   // "5m" (the default) or "1h"
};

// What a client says about caching, validated by the front end and honoured by the
// server as cache holds (see docs/api.md).
struct CacheHints {
  std::vector<CacheBreakpoint> breakpoints;  // Anthropic cache_control, in prompt order
  std::string key;            // OpenAI prompt_cache_key: groups one conversation's requests
  bool extended = false;      // OpenAI prompt_cache_retention "24h"
};

struct GenerationRequest {
  Flavor flavor = Flavor::kOpenAIChat;
  std::string model;
  // Chat requests carry messages; text completions carry a raw prompt.
  std::vector<Message> messages;
  std::optional<std::string> prompt;
  std::vector<Tool> tools;
  std::string tool_choice = "auto";  // "auto", "none", "required", or a function name
  bool parallel_tool_calls = true;
  std::optional<bool> enable_thinking;  // unset: the template's default
  std::map<std::string, std::string> template_kwargs;  // values are JSON text
  Sampling sampling;
  std::optional<int> max_tokens;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  std::string cache_salt;      // isolates cache namespaces
  CacheHints cache_hints;
};

enum class FinishReason { kStop, kLength, kToolCalls, kStopSequence, kCancelled };

// How the prompt was served from the cache; reported as usage.hearth_cache.
struct CacheReport {
  int reused_tokens = 0;
  int prefilled_tokens = 0;
  int written_tokens = 0;       // Usage::cache_written_tokens (at admission: 0, nothing yet)
  std::string tier;             // "device", "ram", "disk", "shared"; empty when nothing was reused
  double restore_ms = 0;
  size_t restored_bytes = 0;    // serialized state read back from RAM or disk
  std::string stopped_because;  // why reuse ended before the cache's knowledge did
  // Why a state the shared tier may hold was not used (it is down, a chunk was evicted);
  // empty when it served, had nothing, or was not asked.
  std::string shared_miss;
  // A span that differs from the conversation's earlier prompt and then rejoins it
  // (a request id, a timestamp): named so the client can move it, or --stabilize can.
  // Only this request's own tokens are described: the earlier prompt may be another
  // client's, and its text must never reach this one.
  bool volatile_span = false;
  int volatile_message = 0;     // index of the message holding it
  int volatile_start = 0;       // [volatile_start, volatile_end): the span's token positions
  int volatile_end = 0;         // in this request's prompt
  std::string volatile_text;    // this request's text in that span
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens reused from the cache, not prefilled
  // Prompt tokens this request prefilled that the cache keeps a state for (a later
  // request can resume through them): Anthropic's cache_creation_input_tokens.
  int cache_written_tokens = 0;
  std::optional<CacheReport> cache;
};

// One step of output. Streams send many; a non-streaming response is their sum.
struct Delta {
  std::string content;
  std::string reasoning;
  // A tool call starts with its id and name; later deltas of the same index append
  // argument text.
  struct ToolCallDelta {
    int index = 0;
    std::string id;    // set on the first delta of this call
    std::string name;  // set on the first delta of this call
    std::string arguments;
  };
  std::vector<ToolCallDelta> tool_calls;
};

// Where one request's time went, as the engine measured it (seconds); for /metrics.
struct Timings {
  double queued_s = 0;           // from its submission to its (last) admission into a slot
  double prefill_s = 0;          // from admission to the first token, or to the end if none came
  double decode_s = 0;           // from the first token to the end; 0 if none came
  std::optional<double> ttft_s;  // from the HTTP request being read to the first token
};

struct Completion {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  FinishReason finish_reason = FinishReason::kStop;
  std::string stop_sequence;  // when finish_reason == kStopSequence
  Usage usage;
  std::optional<Timings> timings;  // set by the engine when the request ends
};

// An error as the API front ends report it.
struct ApiError {
  int http_status = 400;
  std::string type;     // "invalid_request_error", "authentication_error", "not_found_error",
                        // "overloaded_error", "api_error", "rate_limit_error"
  std::string message;
  std::string param;    // the offending field, when one is to blame
};

}  // namespace hearth::api
