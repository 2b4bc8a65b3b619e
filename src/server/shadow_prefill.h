// ShadowPrefill: the engine's side of shadow prefill (shadow.h has the targets and the
// mailbox, docs/cache.md the design). While a chat reply is generated, a second sequence
// (the slot's Slot::Shadow) is fed the reply as the next request will carry it; when the
// reply ends the shadow goes to the cache, or is released.
//
// The engine loop calls, per step: Poll (take each shadow's newest target, before the
// batch is planned), RecordFed (after a decode that carried shadow tokens succeeded); per
// request: Start (once its first token is out), PostProgress (after each streamed token),
// Finish (the reply ended) or Drop (it failed, or its sequence is needed).
//
// Threads: everything runs on the engine thread, which owns the context and the cache.
// The only state shared with another thread is each shadow's ShadowMailbox (its own lock):
// the progress callback hands it to the warm-ahead worker, which publishes targets there.
//
// Invariants:
//  1. A shadow sequence lives only as long as its request; it holds prompt[0, fork) + fed
//     (ShadowHolds), and its lease returns it to the cache on every path.
//  2. It reaches the cache (Finish) only when the final reply still begins with what the
//     target its last tokens came from was rendered from; else it is released.
//  3. Fed tokens are recorded only after the decode that carried them succeeded
//     (RecordFed, and the drain's own decodes); a failed decode changes nothing.
//  4. A target that leaves what the shadow holds starts it over from an earlier boundary
//     (at most a few times per request) or ends it.
//  5. Nothing is fed beside the decode steps but with ShadowFeed::kWithDecode (the batch
//     planner's shadows_in_steps), kAfterReply's whole tiles, and kPaced's where the
//     namespace's clients are not known to pause long enough for warm-ahead to feed them
//     (ShadowCandidate::tiles); nothing at all with ShadowFeed::kOff.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/types.h"
#include "cache/prefix_cache.h"
#include "engine/context.h"
#include "engine/model.h"
#include "server/batch_planner.h"
#include "server/client_pause.h"
#include "server/engine_stats.h"
#include "server/shadow.h"
#include "server/slot.h"
#include "server/task.h"

namespace hearth::server {

// Where a shadow's tokens go (docs/cache.md, "Shadow prefill").
enum class ShadowFeed {
  // No shadow prefill (--shadow-prefill off).
  kOff,
  // Beside the reply's decode steps, eight or more at a time, and the rest when the reply
  // ends. Next to one decode token a few more cost little on a GPU.
  kWithDecode,
  // When the reply ends (up to 64 tokens in one decode), and beside the decode only in
  // whole background chunks (64 tokens) while two or more wait (a re-rendered tool
  // loop); warm-ahead prepares what is left in the idle time after. On a CPU every token
  // of a step is computed, and with flash attention a step of 2-63 tokens costs several
  // times per token what a 64-token step does: a shadow fed 8 at a time beside the
  // decode slowed it by a third.
  kAfterReply,
  // When the reply ends only, as kAfterReply but without the tiles: a re-rendered tool
  // loop is left to warm-ahead in the pause before the next request (a person reading),
  // and the replies decode at the engine's speed. A client that answers at once then
  // prefills that loop itself (docs/benchmarks.md, "Shadow prefill").
  kReplyEnd,
  // kReplyEnd where the pause before a user turn is known to hold warm-ahead's prefill of
  // what is left (ClientPause::HoldsPrefill: the namespace's last pauses against the
  // engine's recent prefill speed), kAfterReply's tiles where it is not, or not yet known. A
  // person reading gets the replies at the engine's speed, a client that answers at once
  // its user turn's re-rendered tool loop prefilled.
  kPaced,
};
// kWithDecode where llama.cpp was built with a GPU backend (engine::GpuOffloadBuilt),
// else kPaced.
ShadowFeed DefaultShadowFeed();
const char* ShadowFeedName(ShadowFeed feed);

// Called on the engine thread while a chat reply is generated, with the reply so far and
// the mailbox its shadow target goes to. Must be quick.
using ShadowProgressCallback =
    std::function<void(const GenerationTask&, const api::Completion&, std::shared_ptr<ShadowMailbox>)>;

// For the drain of a finished reply: nullopt while no request waits in the queue, else
// the longest prefix of `tokens` that a queued request's prompt shares (in the namespace
// of the reply's request).
using QueuedPrefixFn = std::function<std::optional<size_t>(std::span<const engine::Token> tokens)>;

class ShadowPrefill {
 public:
  struct Options {
    ShadowFeed feed = ShadowFeed::kAfterReply;
    int wait_ms = 0;     // tests: wait this long for each render, for determinism
    int n_batch = 512;   // the most tokens one decode of the drain carries
    bool verbose = false;  // a log line for each shadow dropped
    const ClientPause* pause = nullptr;  // kPaced: must outlive this object; null: no pause known
  };
  // Every reference must outlive this object. `on_progress` is read at each Start and
  // post, so it may be set after construction (before the engine thread starts).
  ShadowPrefill(const engine::Model& model, engine::Context& ctx, cache::PrefixCache& cache, Options options,
                StatsBoard& stats, const ShadowProgressCallback& on_progress);

  ShadowFeed feed() const { return options_.feed; }

  // Lends `slot` a shadow holding exactly prompt[0, fork): a fork of the request's
  // sequence while it holds just that; past it, one reseeded from it (attention) and from
  // the state kept at the fork (the recurrent part). Does nothing when the feed is off,
  // there is no progress callback, the reply is not parsed, a shadow exists, no sequence
  // is to spare, or no state is at the fork.
  void Start(Slot& slot);
  // After a token of `slot`'s reply was streamed: hands the reply so far to the renderer
  // when more of it became stable and no render is in flight. REQUIRES: slot.shadow.
  void PostProgress(Slot& slot);

  // Takes each shadow's newest target; one whose target leaves what it holds, and that
  // cannot start over, ends. Returns the rest as the batch planner sees them (slot order)
  // and clears each shadow's n_in_batch.
  std::vector<ShadowCandidate> Poll(SlotTable& slots);
  // The decode carrying each shadow's n_in_batch tokens succeeded: they are fed now, and
  // a state is kept where one ends at a message end of its target.
  void RecordFed(SlotTable& slots);

  // The request ended with `final_reply` (what the client will send back; for a reply cut
  // off, what it received): feeds the shadow the rest of the reply where that is bounded,
  // then gives it to the cache or releases it (invariant 2). Returns what the kept shadow
  // holds (the next turn resumes from it), nullopt when it was released or none exists.
  std::optional<std::vector<engine::Token>> Finish(Slot& slot, const api::Completion& final_reply, bool cut_off,
                                                   const QueuedPrefixFn& queued);
  // Releases `slot`'s shadow, if any, without a final reply; `why` goes to the log.
  void Drop(Slot& slot, const char* why);
  // Releases the shadow of the youngest request; false when there is none.
  bool DropYoungest(SlotTable& slots);

 private:
  struct DrainPlan;  // shadow_prefill_drain.cc
  int UnfedTokens(Slot& slot);
  bool TakesTiles(const Slot& slot, int unfed) const;
  bool Reseed(Slot& slot);
  bool ReseedAtOwnMessageEnd(Slot& slot, int32_t boundary);
  bool ReseedAtRequestMark(Slot& slot, std::span<const int32_t> kept);
  void KeepStateAtMessageEnd(Slot& slot);
  void DrainRest(Slot& slot, const api::Completion& final_reply, bool cut_off, const QueuedPrefixFn& queued);
  std::optional<DrainPlan> PlanDrain(Slot& slot, const api::Completion& final_reply, bool cut_off);
  void Drain(Slot& slot, const DrainPlan& plan, const QueuedPrefixFn& queued);
  bool DecodeInto(Slot::Shadow& sh, size_t at, size_t stop);
  void Close(Slot& slot, bool keep, bool had_final_reply, const char* why);

  const engine::Model& model_;
  engine::Context& ctx_;
  cache::PrefixCache& cache_;
  Options options_;
  StatsBoard& stats_;
  const ShadowProgressCallback& on_progress_;
};

// What a slot's shadow sequence holds: prompt[0, fork) + fed. REQUIRES: slot.shadow.
std::vector<engine::Token> ShadowHolds(const Slot& slot);

}  // namespace hearth::server
