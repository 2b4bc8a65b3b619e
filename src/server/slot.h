// Slot: one request in flight inside the engine loop, bound to one context sequence.
//
// Owned and touched only by the engine loop thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/types.h"
#include "cache/prefix_cache.h"
#include "cache/sequence_lease.h"
#include "engine/sampler.h"
#include "server/output_pipeline.h"
#include "server/request_stream.h"
#include "server/shadow.h"
#include "server/task.h"

namespace hearth::server {

// What a slot runs: a request (sampled, streamed, shadowed), or warm-ahead's background
// prefill (WarmAheadTask: its task holds the prompt, namespace and snapshot positions
// only, nothing is sampled, and its stream gets one kDone with no output).
enum class SlotKind { kRequest, kWarmAhead };

struct Slot {
  SlotKind kind = SlotKind::kRequest;
  cache::SequenceLease lease;        // holds nothing while paused: its sequence is the cache's
  GenerationTask task;
  size_t n_stale_prefix = 0;         // kWarmAhead: WarmAheadTask::StalePrefix()
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<engine::Sampler> sampler;
  std::unique_ptr<OutputPipeline> output;  // its text to the stream; null for background tasks

  size_t n_prompt_done = 0;          // prompt tokens already in the sequence
  int n_cached = 0;                  // of those, reused rather than prefilled
  bool newest_held = false;          // the state the next turn resumes from is held (HoldNewest)
  cache::ResumeReport resume;        // where the reused part came from
  api::CacheReport report;           // what the response says about the cache
  size_t next_snapshot = 0;          // index into task.snapshot_positions
  std::vector<engine::Token> generated;
  std::optional<engine::Token> pending;  // sampled, to be decoded next step
  bool in_batch = false;                 // has tokens in the batch being decoded
  std::optional<int> logits_index;       // its logits row in that batch, when it samples

  // Shadow prefill (shadow_prefill.h): a forked sequence fed the reply as the next request will
  // carry it. Holds prompt[0, fork) + fed.
  struct Shadow {
    cache::SequenceLease lease;         // holds nothing once a start-over found no sequence
    int32_t fork = 0;                   // 0 after a start-over from a state the cache held
    std::vector<engine::Token> fed;     // after the fork
    size_t n_in_batch = 0;              // of the next target tokens, in the batch being decoded
    std::shared_ptr<ShadowMailbox> mailbox;
    uint64_t version = 0;               // of the target below
    ShadowTarget target;                // the newest one checked against the prompt
    int unfed = 0;                      // of target.tokens, not yet fed (or in the batch)
    int reseeds = 0;                    // times it started over at an earlier boundary
    std::string fed_content, fed_reasoning;  // basis of the target the last fed tokens came from
    std::pair<int, size_t> posted{-1, 0};  // what the last render was asked for (phase, stable length)
    size_t posted_at = 0;               // generated tokens when it was asked for
  };
  std::optional<Shadow> shadow;
  bool shadow_due = false;  // the prompt reached the fork; the shadow starts after the first token

  std::chrono::steady_clock::time_point t_admitted;
  std::chrono::steady_clock::time_point t_prefilled;
  std::chrono::steady_clock::time_point t_first_token;

  bool prefilling() const { return n_prompt_done < task.prompt.size(); }
  bool background() const { return kind == SlotKind::kWarmAhead; }
};

// The engine's slots, one per request decoded together: null where free.
using SlotTable = std::vector<std::unique_ptr<Slot>>;

// Where the slot's time went, for a request ending at `end`.
inline api::Timings TimingsOf(const Slot& slot, std::chrono::steady_clock::time_point end) {
  using Seconds = std::chrono::duration<double>;
  const bool first = slot.t_first_token != std::chrono::steady_clock::time_point{};
  api::Timings t;
  t.queued_s = Seconds(slot.t_admitted - slot.task.submitted).count();
  t.prefill_s = Seconds((first ? slot.t_first_token : end) - slot.t_admitted).count();
  if (first) {
    t.decode_s = Seconds(end - slot.t_first_token).count();
    t.ttft_s = Seconds(slot.t_first_token - slot.task.received).count();
  }
  return t;
}

}  // namespace hearth::server
