// GenerationTask: what the HTTP side hands the engine loop, already rendered and
// tokenized (rendering happens on the HTTP thread so the loop only ever sees tokens).
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "engine/chat_template.h"
#include "engine/sampler.h"
#include "engine/types.h"

namespace hearth::server {

struct GenerationTask {
  std::vector<engine::Token> prompt;
  engine::SamplingParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;
  // Chat requests: parse the output into reasoning / content / tool calls. Unset for raw
  // text completions.
  std::optional<engine::OutputFormat> output_format;

  // Prefix cache: the namespace the prompt lives in (model, context settings, salt) and
  // the prompt positions where a later request can arrive (message boundaries, the start
  // of generation), ascending. Partial snapshots are taken there during prefill.
  std::string cache_namespace;
  std::vector<int32_t> snapshot_positions;
  // Chat prompts: where generation starts as re-rendered history sees it (before the
  // template's generation suffix, e.g. "<think>\n"); one of snapshot_positions. Shadow
  // prefill (shadow.h) forks here. -1: none.
  int32_t generation_start = -1;
  // --stabilize moved per-request spans to the end of the last message: the next request
  // renders that message without them, so it shares this prompt only up to where they
  // begin. A snapshot position; the shadow forks here instead of at generation_start.
  // -1: nothing moved.
  int32_t moved_spans_start = -1;

  // Clients' cache hints (api::CacheHints) as positions: the states at each breakpoint
  // are held for its ttl; the request's newest state for `newest_hold_seconds` (0: the
  // server's --cache-pin-minutes), grouped under `cache_conversation` when given.
  struct CacheBreakpoint {
    int32_t position = 0;  // one of snapshot_positions
    int ttl_seconds = 300;
  };
  std::vector<CacheBreakpoint> cache_breakpoints;
  std::string cache_conversation;
  int newest_hold_seconds = 0;

  // The request this task was built from, for warm-ahead after it finishes; null for
  // tasks built without one (tests, raw token prompts).
  std::shared_ptr<const api::GenerationRequest> request;
  // When the server had the whole HTTP request (before parsing it); the request log
  // times the first token from here. Left unset, Submit sets it.
  std::chrono::steady_clock::time_point received{};
  // When Submit queued it (set by Submit).
  std::chrono::steady_clock::time_point submitted{};
};

// Background prefill (warm-ahead.h): a conversation's next prompt, prepared in the cache
// before its request comes. It runs only while no request waits, is preempted by any,
// produces no output (its stream gets one kDone, or kError), and only its snapshots matter.
struct WarmAheadTask {
  std::vector<engine::Token> prompt;
  std::string cache_namespace;
  std::vector<int32_t> snapshot_positions;  // ascending; taken during the prefill
  // Resume no deeper than this (warm-ahead of a cut reply: before its cut-off snapshots,
  // so they are taken even when a kept shadow reaches further). Unset: no limit.
  std::optional<int32_t> max_resume;
  std::chrono::steady_clock::time_point submitted{};  // set by Submit
  // When the reply it follows ended (before its render); unset: when it was submitted.
  std::chrono::steady_clock::time_point reply_ended{};
  // Where the prompt leaves the prompt of the request whose reply it prepares the next
  // turn for (that reply, or earlier where the template re-renders history). A later
  // request of the conversation that begins with these tokens is the next turn, or a
  // turn past it: it came after that reply, with it or with another in its place (an
  // agent's scripted call, an edit). 0: unknown.
  int32_t fork = 0;

  // How many of the prompt's first tokens a request must begin with for this work to be
  // stale (it computes or reuses them itself, or went another way): up to the fork, and
  // up to max_resume for a cut reply, whose end the client may have read less of than
  // was written.
  size_t StalePrefix() const {
    size_t n = prompt.size();
    if (fork > 0) n = std::min(n, static_cast<size_t>(fork));
    if (max_resume) n = std::min(n, static_cast<size_t>(std::max(0, *max_resume)));
    return n;
  }
};

// Where the next request stops sharing this prompt, so where its shadow forks: the start
// of generation, or earlier where --stabilize moved spans to the end of the last message.
inline int32_t ShadowFork(const GenerationTask& task) {
  return task.moved_spans_start >= 0 ? task.moved_spans_start : task.generation_start;
}

}  // namespace hearth::server
