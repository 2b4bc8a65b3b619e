// EngineLoop: the single thread that owns the llama context and the prefix cache and runs
// every request. One step: schedule (the Scheduler, scheduler.h: admit queued tasks into
// free slots, resuming each prompt from the cache; free KV room when a decode finds
// none), plan the batch (batch_planner.h: a decode token for every generating slot plus
// prefill chunks within the batch budget, each chunk ending at the next snapshot
// position, then shadow chunks), decode, and commit (progress, snapshots, then sample
// and stream each slot's next token; engine_loop_output.cc; each request's text through
// its OutputPipeline, output_pipeline.h). A finished or cancelled request's sequence goes
// back to the cache with everything it computed. Shadow prefill is its own component
// (shadow_prefill.h); the wait queues are in task_queue.h.
//
// Threads: Start/Stop from the owner; Submit and stats() from any thread (HTTP handlers);
// everything else runs on the loop thread.
//
// Invariants:
//  1. Only the loop thread touches the Context, the slots and the samplers.
//  2. Every submitted task ends with exactly one kDone or kError event on its stream
//     (a warm-ahead's kDone carries no output; one skipped or dropped unrun ends too, and
//     a task still queued when the loop stops, or stops without ever having started,
//     gets kUnavailable).
//  3. Which task runs in which slot keeps scheduler.h's invariants: the queue limit,
//     warm-ahead only while no request waits or runs, paused requests first. Warm-ahead
//     computes nothing while a request prefills (batch_planner.h).
//  4. A shadow lives only as long as its request and reaches the cache only when the
//     final reply agrees with it (shadow_prefill.h, its invariants 1 and 2).
//  5. Every sequence a slot or shadow holds is a cache::SequenceLease, so it returns to
//     the cache on every path; a slot's prefill progress (n_prompt_done) moves only after
//     the decode that carried it succeeded (batch_planner.h plans, changing nothing).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "base/status.h"
#include "cache/cache_summary.h"
#include "cache/disk_store.h"
#include "cache/shared_store.h"
#include "cache/prefix_cache.h"
#include "engine/context.h"
#include "engine/model.h"
#include "server/batch_planner.h"
#include "server/engine_stats.h"
#include "server/request_log.h"
#include "server/request_stream.h"
#include "server/runner.h"
#include "server/scheduler.h"
#include "server/shadow_prefill.h"
#include "server/slot.h"
#include "server/task.h"
#include "server/task_queue.h"

namespace hearth::server {

struct EngineConfig {
  engine::ContextOptions context;  // n_seq_max = n_parallel + device sequences kept for the cache
  int n_parallel = 2;              // requests decoded together
  int max_queued = 64;             // tasks waiting for a slot before Submit says 503
  size_t cache_ram_bytes = 1u << 30;
  // Each request's newest state is held (cache::PrefixCache::Hold) for this long, within
  // cache_pin_bytes of the RAM tier: live conversations before idle ones.
  int cache_pin_minutes = 10;
  size_t cache_pin_bytes = 1u << 29;
  std::string cache_dir;           // empty: no disk tier
  cache::FileSystem* cache_file_system = nullptr;  // the disk tier's files; nullptr: the machine's
  size_t cache_disk_bytes = 8ull << 30;
  std::string cache_namespace;     // the model's fingerprint; tasks add their salt
  // Opens the shared tier (cache/shared_store.h; --cache-redis) for states of one model
  // and state layout: `scope` (StateScope) is to be part of every key, so replicas of
  // other models or KV settings never see these states. Unset: no shared tier. Several
  // loops may get one store (tests: replicas in one process).
  std::function<StatusOr<std::shared_ptr<cache::SharedStore>>(const std::string& scope)> open_shared_tier;
  // The disk tier lives in <cache_dir>/states-<hash of cache_namespace and the context's
  // state layout>, so one --cache-dir serves several models and KV settings, each finding
  // its own states and leaving the others' alone.
  bool verbose = false;            // one log line per request
  bool prefix_cache = true;        // false (--no-cache): no reuse, no snapshots, nothing kept; a baseline
  // Shadow prefill (shadow_prefill.h; kOff: none); it needs a progress callback.
  ShadowFeed shadow_feed = DefaultShadowFeed();
  int shadow_wait_ms = 0;          // tests: wait this long for each shadow render, for determinism
  // Most positions one sequence may hold (server/context_size.h: the training context
  // when the cells exceed it). Unset: context.n_ctx.
  std::optional<int> n_ctx_seq;

  int SeqPositions() const { return std::min(context.n_ctx, n_ctx_seq.value_or(context.n_ctx)); }
};

// 16 hex digits of XXH3-64 of cache_namespace and layout (engine::Context::StateLayout):
// names the states of one model and state layout, on disk and in the shared tier.
std::string StateScope(const std::string& cache_namespace, const std::string& layout);
// <cache_dir>/states-<StateScope>: where the disk tier of one model and layout lives.
std::string DiskTierDir(const std::string& cache_dir, const std::string& cache_namespace, const std::string& layout);

class EngineLoop : private SchedulerHooks {
 public:
  // `model` must outlive the loop.
  EngineLoop(const engine::Model& model, EngineConfig config);
  ~EngineLoop();  // stops the thread; unfinished requests get a kError event

  // Creates the context, the cache and the disk tier. Errors: from Context::Create and
  // DiskStore::Open. Once only.
  Status Open();
  // Whether the context runs flash attention (Context::flash_attn). REQUIRES: Open()
  // succeeded; call before Start (the engine thread owns the context after).
  bool flash_attn() const { return ctx_->flash_attn(); }
  // Opens when not yet open, then starts the engine thread.
  Status Start();
  void Stop();

  // Queues a task. Errors: kResourceExhausted when the wait queue is full;
  // kUnavailable when stopped.
  StatusOr<std::shared_ptr<RequestStream>> Submit(GenerationTask task);
  // Queues background prefill; its stream gets one kDone (no output) or kError. A full
  // warm-ahead queue ends its oldest task (TaskQueue). Errors: kUnavailable when stopped.
  StatusOr<std::shared_ptr<RequestStream>> Submit(WarmAheadTask task);

  // Called on the loop thread when a request finishes (also when cancelled), with its
  // task and what it produced (cancelled: what its client received), with its usage and
  // timings. Must be quick: post the work elsewhere. Set before Start.
  using FinishedCallback = std::function<void(const GenerationTask&, const api::Completion&)>;
  void SetFinishedCallback(FinishedCallback callback) { on_finished_ = std::move(callback); }

  // Called on the loop thread while a chat reply is generated, with the reply so far and
  // the mailbox its shadow target goes to (see shadow.h). Must be quick. Set before Start.
  using ProgressCallback = ShadowProgressCallback;
  void SetProgressCallback(ProgressCallback callback) { on_progress_ = std::move(callback); }

  EngineStats stats() const;
  // The prefix cache as the loop last summarized it (when idle, else at most every
  // 250 ms; see cache_summary.h), and the requests it finished last (request_log.h).
  // Any thread; never null.
  std::shared_ptr<const cache::CacheSummary> CacheSnapshot() const;
  std::vector<RequestRecord> RecentRequests(const std::function<bool(const std::string& ns)>& visible = {}) const {
    return recent_.Recent(visible);
  }
  // Both as GET /v1/cache shows them to a client that sees every namespace.
  std::string DescribeCache() const;
  // Why the disk tier that cache_dir asks for is off (the directory could not be
  // created, read or written at start): empty when it runs or none was asked for.
  // Set by Start.
  const std::string& disk_unavailable() const { return disk_unavailable_; }
  const EngineConfig& config() const { return config_; }

 private:
  // engine_loop_cache_view.cc: what GET /v1/cache shows.
  cache::CacheSummary Summarize() const;  // SummarizeCache, with what the loop knows of the disk tier
  void RecordRequest(const Slot& slot, const char* outcome);  // into recent_

  // The step (engine_loop.cc): schedule, plan and decode, commit.
  void Run();
  void Step();
  void FailInFlight(const Status& error);
  void AnswerWaiting(const Status& error);
  bool WaitForWork();
  int BusySlots() const;
  void NotePrefillSpeed(std::chrono::steady_clock::duration took);  // slots holding a request
  void PlanStep();
  void CommitStep();
  void TakeSnapshots(Slot& slot, bool first_token_out);

  // Scheduling is the Scheduler's (scheduler.h); what it asks of the loop (SchedulerHooks,
  // engine_loop.cc) and what the loop asks of it.
  void EndSlot(Slot& slot, api::FinishReason reason) override { Finish(slot, reason); }
  void DropShadow(Slot& slot, const char* why) override { EndShadow(slot, nullptr, why); }
  bool DropYoungestShadow() override { return DropOneShadow(); }
  api::Usage AdmittedUsage(const Slot& slot) const override { return UsageSoFar(slot); }
  SlotTable& slots() { return scheduler_->slots(); }
  bool ForegroundQueued() const { return tasks_.HasRequests(); }  // a request waits in the queue
  // The longest prefix of `tokens` that a queued request's prompt in `ns` begins with.
  size_t QueuedSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const {
    return tasks_.RequestsSharedPrefix(ns, tokens);
  }

  // Output and the end of a request (engine_loop_output.cc).
  void EmitToken(Slot& slot, engine::Token token);
  void Finish(Slot& slot, api::FinishReason reason, std::string stop_sequence = "");
  api::Completion CompleteOutput(Slot& slot, api::FinishReason reason, std::string stop_sequence);
  // The slot's shadow ends: drained and kept or released with `final_reply`, released
  // without one (shadow_prefill.h).
  void EndShadow(Slot& slot, const api::Completion* final_reply, const char* why = "", bool cut_off = false);
  bool DropOneShadow() { return shadows_->DropYoungest(slots()); }
  void FailSlot(Slot& slot, const Status& error) override;  // SchedulerHooks too
  void Release(Slot& slot, bool keep_in_cache);
  void HoldNewest(Slot& slot, std::span<const engine::Token> tokens);
  int CacheWritten(const std::string& ns, const std::vector<engine::Token>& prompt, int n_cached);
  void LogRequest(const Slot& slot, const char* outcome) const;
  api::Usage UsageSoFar(const Slot& slot) const;

  const engine::Model& model_;
  EngineConfig config_;
  TaskQueue tasks_;  // requests and background tasks waiting for a slot
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<cache::SequenceStore> sequences_;
  std::unique_ptr<cache::DiskStore> disk_;
  std::shared_ptr<cache::SharedStore> shared_;  // null: no shared tier
  std::string disk_unavailable_;
  std::unique_ptr<cache::PrefixCache> cache_;
  std::unique_ptr<ShadowPrefill> shadows_;  // made with the cache (Open)
  FinishedCallback on_finished_;
  ProgressCallback on_progress_;
  std::unique_ptr<Scheduler> scheduler_;  // made by Open: the slots, the paused requests, admission
  std::unique_ptr<Runner> runner_;  // decodes each step's plan; made with the context (Open)
  std::chrono::steady_clock::time_point summary_refreshed_;  // when cache_summary_ was last built
  std::chrono::steady_clock::time_point last_busy_;          // the last step that decoded

  mutable std::mutex summary_mu_;
  std::shared_ptr<const cache::CacheSummary> cache_summary_;  // guarded by summary_mu_; refreshed by the loop when idle, else every 250 ms
  ClientPause pause_;          // its own lock: Submit records, the shadows read (kPaced)
  RequestLog recent_;          // its own lock
  StatsBoard stats_;           // its own lock; queued is read from tasks_ when read
  std::thread thread_;
};

}  // namespace hearth::server
