// Scheduler: which task runs in which slot. It holds the slots table and the requests
// paused for KV room, and admits from the wait queues (task_queue.h), resuming each
// prompt from the prefix cache. Warm-ahead (WarmAheadTask) gives way to requests, and a
// decode short of KV cells climbs a ladder (MakeRoom): drop a shadow, evict an idle
// cached sequence, requeue the youngest prefill, pause the youngest of several
// generating requests, resumed once the older ones are done.
//
// It ends nothing itself: a request's end (its output, its shadow) is the engine loop's,
// reached through SchedulerHooks.
//
// Threads: the loop thread only (the TaskQueue it admits from has its own lock).
//
// Invariants:
//  1. The wait queue never holds more than max_queued requests; Submit refuses the rest
//     (TaskQueue's invariant 1). Requests put back (no sequence free, requeued for room)
//     are not refused.
//  2. Warm-ahead starts only while no request waits or runs (a paused one included); a
//     request arriving preempts it before the request is admitted, keeping what it
//     prefilled. Warm-ahead whose prompt the cache holds, or that an admitted request's
//     prompt covers (WarmAheadTask::StalePrefix), computes nothing.
//  3. A request paused for KV room holds no sequence: its tokens are in the cache; it
//     resumes, before any queued task is admitted, once no other request runs.
//  4. A prefill requeued for room is admitted again only after a request has ended
//     (Free): admitted at once, it would find the same cells taken.
//  5. A slot's entry empties only through Free (the hooks' ends call it), or when the
//     scheduler moves the slot to the queue or to the paused list.
//  6. A request admitted with more of its prompt to prefill than the KV cells left free
//     (engine::Context::UsedCells: cells sequences share count once) gets them from idle
//     cached sequences before its first decode, not from the ladder midway.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/prefix_cache.h"
#include "engine/context.h"
#include "engine/model.h"
#include "server/engine_stats.h"
#include "server/slot.h"
#include "server/task_queue.h"

namespace hearth::server {

struct EngineConfig;

// What the scheduler needs of the loop's output and shadow side. Each end frees the
// slot (Scheduler::Free) and destroys it.
class SchedulerHooks {
 public:
  virtual ~SchedulerHooks() = default;
  // Ends a request with `reason` and what it produced, or a warm-ahead with its kDone;
  // the sequence goes to the cache with everything it computed.
  virtual void EndSlot(Slot& slot, api::FinishReason reason) = 0;
  // Ends a request with `error`; its sequence goes back empty.
  virtual void FailSlot(Slot& slot, const Status& error) = 0;
  // Ends the slot's shadow, if any, without keeping it (`why` goes to the log).
  virtual void DropShadow(Slot& slot, const char* why) = 0;
  // Ends the youngest request's shadow; false when none has one.
  virtual bool DropYoungestShadow() = 0;
  // What an admitted request's stream reports before its prefill (kAdmitted).
  virtual api::Usage AdmittedUsage(const Slot& slot) const = 0;
};

class Scheduler {
 public:
  // Every argument must outlive the scheduler.
  Scheduler(const engine::Model& model, engine::Context& ctx, cache::PrefixCache& cache, const EngineConfig& config,
            TaskQueue& tasks, StatsBoard& stats, SchedulerHooks& hooks);

  // The step's schedule. Cancelled requests end before admission (a client that cut a
  // reply off and sent the next request at once resumes from what the cut one computed,
  // which it holds until it ends), and again after (one cancelled while it waited
  // computes nothing).
  void Schedule();
  void DropCancelled();
  void AdmitQueued();
  // The KV-room ladder's next rung after a decode found no cells; false when none is
  // left (only a batch of decode tokens alone can still fail).
  bool MakeRoom();
  // `slot`'s request ended: its entry empties (destroying it), and a prefill requeued
  // for room may be admitted again.
  void Free(const Slot& slot);
  // Shutdown: every paused request ends with `error`.
  void FailPaused(const Status& error);

  // null entries are free; n_parallel of them.
  SlotTable& slots() { return slots_; }
  const SlotTable& slots() const { return slots_; }
  int n_busy() const;  // slots holding a request or warm-ahead
  bool has_paused() const { return !paused_.empty(); }
  bool ForegroundQueued() const { return tasks_.HasRequests(); }  // a request waits in the queue
  bool ForegroundPrefilling() const;  // a request in a slot has not had its first token
  // The longest prefix of `tokens` that a queued request's prompt in `ns` begins with.
  size_t QueuedSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const {
    return tasks_.RequestsSharedPrefix(ns, tokens);
  }

 private:
  // Admission (scheduler.cc).
  std::optional<QueuedTask> PopRequest();
  std::optional<QueuedWarmAhead> PopWarmAhead();
  bool AdmitRequest(QueuedTask q, size_t slot_index);
  bool AdmitWarmAhead(QueuedWarmAhead q, size_t slot_index);
  void Place(std::unique_ptr<Slot> slot, size_t slot_index);
  cache::SequenceLease LeaseFor(const GenerationTask& task, std::optional<int32_t> max_resume, bool may_take_room,
                                cache::ResumeReport& report);
  void ExplainDivergence(Slot& slot);
  void DropWarmAheadCoveredBy(const GenerationTask& task);
  bool Fits(int n_prompt, RequestStream& stream) const;
  bool HasForegroundWork() const;

  // Background work giving way, and the KV-room ladder (scheduler_room.cc).
  void PreemptBackground(bool force = false);
  bool EndOneBackground();  // false when none runs
  // Idle cached sequences move to RAM until `n_tokens` more fit beside the cells the
  // sequences hold (invariant 6), or none is left.
  void MakeRoomAhead(int64_t n_tokens);
  bool RequeueYoungestPrefill();
  bool PauseYoungestGenerating();
  void ResumePaused();

  const engine::Model& model_;
  engine::Context& ctx_;
  cache::PrefixCache& cache_;
  const EngineConfig& config_;
  TaskQueue& tasks_;
  StatsBoard& stats_;
  SchedulerHooks& hooks_;
  SlotTable slots_;  // null when free
  std::deque<std::unique_ptr<Slot>> paused_;  // oldest first; their sequences are in the cache
  bool wait_for_room_ = false;  // a prefill went back to the queue for room; none has ended since
};

}  // namespace hearth::server
