#include "server/engine_loop.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cache/snapshot_policy.h"
#include "server/context_sequence_store.h"
#include "server/metrics.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

// Write-behind to the disk tier waits this long after the last decode: a client that
// answers at once (an agent after a tool call) should not wait behind a state copy.
constexpr auto kWriteBehindDelay = std::chrono::milliseconds(1000);
// Another replica may get the conversation's next turn as soon as its client has read the
// reply: states go to the shared tier after a short idle time (the writes themselves are
// behind, on the store's thread; only serializing a device sequence costs this one).
constexpr auto kShareBehindDelay = std::chrono::milliseconds(100);
constexpr int kSharedFlushMs = 10000;  // a graceful stop waits this long for shared writes
// Tokens per step for warm-ahead prefill (batch_planner.h), or the context's efficient
// batch floor when that is more (on a CPU with flash attention 32 tokens cost 7x what 64 do).
constexpr int kBackgroundChunk = 32;

}  // namespace

std::string StateScope(const std::string& cache_namespace, const std::string& layout) {
  const std::string key = cache_namespace + "|" + layout;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  return hex;
}

std::string DiskTierDir(const std::string& cache_dir, const std::string& cache_namespace, const std::string& layout) {
  return cache_dir + "/states-" + StateScope(cache_namespace, layout);
}

EngineLoop::EngineLoop(const engine::Model& model, EngineConfig config) :
    model_(model), config_(std::move(config)), tasks_(config_.max_queued) {
}

EngineLoop::~EngineLoop() { Stop(); }

Status EngineLoop::Open() {
  if (ctx_ != nullptr) return Internal("the engine is already open");
  if (config_.n_parallel < 1 || config_.n_parallel > config_.context.n_seq_max) {
    return InvalidArgument("n_parallel must be in [1, n_seq_max]");
  }
  auto ctx = engine::Context::Create(model_, config_.context);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(*ctx);
  runner_ = std::make_unique<Runner>(*ctx_, BatchLimits{.n_batch = config_.context.n_batch,
                                                        .n_ubatch = std::min(config_.context.n_ubatch, config_.context.n_batch),
                                                        .prefill_floor = ctx_->efficient_batch_floor(),
                                                        .background_chunk = std::max(kBackgroundChunk, ctx_->efficient_batch_floor()),
                                                        .shadows_in_steps = config_.shadow_feed == ShadowFeed::kWithDecode});
  sequences_ = std::make_unique<ContextSequenceStore>(*ctx_);
  if (!config_.cache_dir.empty()) {
    cache::DiskStore::Options options;
    options.file_system = config_.cache_file_system;
    auto disk = cache::DiskStore::Open(DiskTierDir(config_.cache_dir, config_.cache_namespace, ctx_->StateLayout()),
                                       config_.cache_disk_bytes, config_.cache_namespace, options);
    if (disk.ok()) {
      disk_ = std::move(*disk);
    } else {
      // A cache is an optimization: serve without the tier rather than not at all.
      disk_unavailable_ = disk.status().message();
      std::fprintf(stderr, "hearth: disk tier OFF: %s; serving with the device and RAM tiers only\n",
                   disk_unavailable_.c_str());
    }
  }
  cache::CacheConfig cc;
  cc.needs_partial = model_.info().NeedsPartialStates();
  cc.suffix_states = model_.info().HasSuffixStates();
  for (int i = 0; i < config_.context.n_seq_max; ++i) cc.sequences.push_back(i);
  cc.ram_budget_bytes = config_.cache_ram_bytes;
  cc.pin_budget_bytes = config_.cache_pin_bytes;
  cache_ = std::make_unique<cache::PrefixCache>(cc, *sequences_, disk_.get());
  shadows_ = std::make_unique<ShadowPrefill>(model_, *ctx_, *cache_,
                                             ShadowPrefill::Options{.feed = config_.shadow_feed,
                                                                    .wait_ms = config_.shadow_wait_ms,
                                                                    .n_batch = config_.context.n_batch,
                                                                    .verbose = config_.verbose,
                                                                    .pause = &pause_},
                                             stats_, on_progress_);
  if (config_.open_shared_tier && config_.prefix_cache) {
    auto shared = config_.open_shared_tier(StateScope(config_.cache_namespace, ctx_->StateLayout()));
    if (!shared.ok()) return shared.status();
    shared_ = std::move(*shared);
    cache_->AttachShared(shared_.get());
  }
  SchedulerHooks& hooks = *this;  // a private base: converted here, where it is accessible
  scheduler_ = std::make_unique<Scheduler>(model_, *ctx_, *cache_, config_, tasks_, stats_, hooks);
  cache_summary_ = std::make_shared<const cache::CacheSummary>(Summarize());
  return Status::Ok();
}

Status EngineLoop::Start() {
  if (ctx_ == nullptr) HEARTH_RETURN_IF_ERROR(Open());
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void EngineLoop::Stop() {
  tasks_.Stop();
  if (!thread_.joinable()) {
    // Never started: no loop answers what was queued.
    AnswerWaiting(Unavailable("the server is shutting down"));
    return;
  }
  thread_.join();
  // The loop is gone; this thread owns the cache now. What the disk tier lacks goes
  // there, so a start on the same --cache-dir resumes every conversation.
  if (config_.prefix_cache && disk_) {
    const int n = cache_->WriteBehind([] { return false; });
    disk_->Flush();
    if (n > 0) std::fprintf(stderr, "hearth: wrote %d cached states to %s\n", n, config_.cache_dir.c_str());
  }
  // And what the shared tier lacks goes there, so other replicas resume it.
  if (config_.prefix_cache && shared_) {
    const int n = cache_->ShareBehind([] { return false; });
    const bool flushed = shared_->Flush(kSharedFlushMs);
    if (n > 0 || !flushed) {
      std::fprintf(stderr, "hearth: gave %d cached states to the shared tier%s\n", n,
                   flushed ? "" : " (some were still being written when the stop's wait ended)");
    }
  }
}

StatusOr<std::shared_ptr<RequestStream>> EngineLoop::Submit(GenerationTask task) {
  auto stream = std::make_shared<RequestStream>();
  if (task.received == Clock::time_point{}) task.received = Clock::now();
  task.submitted = Clock::now();
  const bool adds_user_message =
      task.request != nullptr && !task.request->messages.empty() && task.request->messages.back().role == "user";
  pause_.RequestArrived(task.cache_namespace, task.prompt, adds_user_message, task.received);
  HEARTH_RETURN_IF_ERROR(tasks_.Push(QueuedTask{std::move(task), stream}));
  return stream;
}

StatusOr<std::shared_ptr<RequestStream>> EngineLoop::Submit(WarmAheadTask task) {
  auto stream = std::make_shared<RequestStream>();
  task.submitted = Clock::now();
  pause_.ReplyEnded(task.cache_namespace, task.prompt, static_cast<size_t>(std::max(task.fork, 0)),
                    task.reply_ended == Clock::time_point{} ? task.submitted : task.reply_ended);
  HEARTH_RETURN_IF_ERROR(tasks_.Push(QueuedWarmAhead{std::move(task), stream}));
  return stream;
}

// Every task still waiting ends with `error`.
void EngineLoop::AnswerWaiting(const Status& error) {
  TaskQueue::Waiting orphans = tasks_.TakeAll();
  for (auto& q : orphans.requests) q.stream->PushError(error);
  for (auto& q : orphans.warm_ahead) q.stream->PushError(error);
}

EngineStats EngineLoop::stats() const {
  EngineStats s = stats_.Read();
  s.queued = tasks_.n_requests();
  return s;
}

// The loop: one batch per iteration. An exception from a step (a library's, or memory
// running out) fails what is in flight, never the process: the loop keeps serving.
void EngineLoop::Run() {
  while (WaitForWork()) {
    try {
      Step();
    } catch (const std::exception& e) {
      FailInFlight(Internal(std::string("the engine failed a step: ") + e.what()));
    } catch (...) {
      FailInFlight(Internal("the engine failed a step"));
    }
  }
}

void EngineLoop::Step() {
  scheduler_->Schedule();
  stats_.Update([&](EngineStats& s) { s.slots_busy = BusySlots(); });
  PlanStep();
  if (runner_->empty()) {
    // Idle: the next request should find a sequence free rather than wait while an
    // idle one moves to RAM; with a disk tier, what a restart would lose is written
    // behind (one state at a time, stopping for a request that comes).
    if (config_.prefix_cache && !ForegroundQueued()) {
      cache_->SpareASequence();
      const auto idle = Clock::now() - last_busy_;
      if (idle >= kShareBehindDelay) cache_->ShareBehind([this] { return ForegroundQueued(); });
      if (idle >= kWriteBehindDelay) cache_->WriteBehind([this] { return ForegroundQueued(); });
    }
    return;
  }
  const auto started = last_busy_ = Clock::now();
  Status s = runner_->Decode([this] { return scheduler_->MakeRoom(); }, [this] { PlanStep(); });
  if (runner_->empty()) return;
  if (s.ok()) NotePrefillSpeed(Clock::now() - started);
  // Counted before the step's outcomes are: a reader who sees a task done sees its decodes.
  stats_.Update([](EngineStats& st) { st.decode_calls++; });
  if (!s.ok()) {
    for (auto& slot : slots()) {
      if (slot && slot->shadow && slot->shadow->n_in_batch > 0) EndShadow(*slot, nullptr, "decode failed");
      if (slot && slot->in_batch) FailSlot(*slot, s);
    }
    return;
  }
  CommitStep();
}

// A step of prompt tokens alone, at least a warm-ahead chunk long, tells ClientPause how
// fast the pause after a reply prefills (a step with a reply's token, or a shadow's beside
// it, would not).
void EngineLoop::NotePrefillSpeed(Clock::duration took) {
  if (runner_->n_tokens() < runner_->limits().background_chunk) return;
  for (const auto& slot : slots()) {
    if (!slot) continue;
    if ((slot->in_batch && slot->pending) || (slot->shadow && slot->shadow->n_in_batch > 0)) return;
  }
  pause_.PrefillStep(runner_->n_tokens(), took);
}

// Ends every request in a slot with `error`; their sequences go back empty. Paused
// requests (their states in the cache, not in the failed step) stay paused.
void EngineLoop::FailInFlight(const Status& error) {
  runner_->Clear();
  for (auto& slot : slots()) {
    if (slot) FailSlot(*slot, error);
  }
}

int EngineLoop::BusySlots() const { return scheduler_->n_busy(); }

bool EngineLoop::WaitForWork() {
  const bool busy = scheduler_->has_paused() || BusySlots() > 0;
  stats_.Update([&](EngineStats& s) {
    s.slots_busy = BusySlots();
    s.cache = cache_->stats();
    if (shared_) s.shared = shared_->stats();
  });
  {
    std::lock_guard<std::mutex> lock(summary_mu_);
    // The tree's summary walks every node: while busy, a few times a second is enough.
    const auto now = Clock::now();
    if (!busy || now - summary_refreshed_ > std::chrono::milliseconds(250)) {
      cache_summary_ = std::make_shared<const cache::CacheSummary>(Summarize());
      summary_refreshed_ = now;
    }
  }
  // Idle with states to write behind: wake up when the engine has been idle long enough.
  if (!busy && config_.prefix_cache && cache_->HasUnshared()) {
    tasks_.WaitForTask(last_busy_ + kShareBehindDelay);
  } else if (!busy && config_.prefix_cache && cache_->HasUnwritten()) {
    tasks_.WaitForTask(last_busy_ + kWriteBehindDelay);
  } else if (!busy) {
    tasks_.WaitForTask(std::nullopt);
  }
  if (!tasks_.stopped()) return true;
  const Status down = Unavailable("the server is shutting down");
  AnswerWaiting(down);
  scheduler_->FailPaused(down);
  for (auto& slot : slots()) {
    if (slot) FailSlot(*slot, down);
  }
  return false;
}

// The slots and shadows as the batch planner sees them, laid out as the runner's batch.
// When the KV cells run out the runner climbs the scheduler's ladder (shadows, idle cached
// sequences, the youngest prefill requeued with its progress kept in the cache, the
// youngest generating request paused) and plans again after each rung.
void EngineLoop::PlanStep() { runner_->Plan(slots(), shadows_->Poll(slots())); }

// Keeps states at the snapshot positions the prompt has reached. A request's state at
// its prompt's end and its shadow's start wait until its first token is out (nothing
// needs them before; each costs a state copy, a shadow's maybe moving an idle sequence to
// RAM first): pass `first_token_out` then.
void EngineLoop::TakeSnapshots(Slot& slot, bool first_token_out) {
  const auto& snaps = slot.task.snapshot_positions;
  while (slot.next_snapshot < snaps.size() && snaps[slot.next_snapshot] <= static_cast<int32_t>(slot.n_prompt_done)) {
    const auto at = static_cast<size_t>(snaps[slot.next_snapshot]);
    if (at == slot.n_prompt_done && config_.prefix_cache) {
      const bool background = slot.background();
      const auto n_prompt = static_cast<int32_t>(slot.task.prompt.size());
      if (!first_token_out && cache::SnapshotPolicy::WaitsForFirstToken(static_cast<int32_t>(at), n_prompt, background)) {
        return;
      }
      const auto prefix = std::span(slot.task.prompt).subspan(0, at);
      cache_->SnapshotPartial(slot.task.cache_namespace, slot.lease.seq(), prefix);
      // Another replica may get the next turn with another reply than this one generates.
      if (cache::SnapshotPolicy::SharesWhole(static_cast<int32_t>(at), slot.task.generation_start, background)) {
        cache_->ShareWhenIdle(slot.task.cache_namespace, prefix);
      }
      if (static_cast<int32_t>(at) == ShadowFork(slot.task)) slot.shadow_due = true;
    }
    ++slot.next_snapshot;
  }
  if (first_token_out && slot.shadow_due) {
    slot.shadow_due = false;
    shadows_->Start(slot);
  }
}

void EngineLoop::CommitStep() {
  auto& table = slots();
  runner_->AdvanceProgress(table);
  shadows_->RecordFed(table);
  // Sample every slot before emitting any token: emitting may finish a request, and a
  // finishing shadow decodes its last tokens (ShadowPrefill::Finish), which replaces the logits.
  std::vector<std::pair<Slot*, engine::Token>> sampled;
  std::vector<size_t> first_tokens;  // indices into the slots table
  for (size_t i = 0; i < table.size(); ++i) {
    auto& slot = table[i];
    if (!slot || !slot->in_batch) continue;
    if (!slot->pending) TakeSnapshots(*slot, /*first_token_out=*/false);
    if (slot->background()) {
      if (!slot->prefilling()) Finish(*slot, api::FinishReason::kStop);
      continue;
    }
    if (!slot->logits_index) continue;
    slot->pending.reset();
    if (slot->generated.empty()) {
      first_tokens.push_back(i);
      slot->t_prefilled = slot->t_first_token = Clock::now();
      stats_.Update([&](EngineStats& s) {
        s.prompt_tokens += static_cast<int64_t>(slot->task.prompt.size());
        s.prompt_tokens_cached += slot->n_cached;
        s.prompt_tokens_prefilled += static_cast<int64_t>(slot->task.prompt.size()) - slot->n_cached;
      });
    }
    sampled.emplace_back(slot.get(), runner_->Sample(*slot));
  }
  for (auto [slot, token] : sampled) EmitToken(*slot, token);
  // The first tokens are out: what waited for them (the new token is not decoded yet, so
  // the sequence still holds exactly the prompt). A request that already finished left
  // its sequence, holding the prompt, to the cache (its place in the slots table is empty).
  for (size_t i : first_tokens) {
    if (table[i]) TakeSnapshots(*table[i], /*first_token_out=*/true);
  }
  // A state copy on the way to a first token (the generation start's) goes into touched
  // memory; the buffer is made while no request waits for its first token.
  if (config_.prefix_cache && !ForegroundQueued() && !scheduler_->ForegroundPrefilling()) ctx_->PrepareSpareState();
}

}  // namespace hearth::server
