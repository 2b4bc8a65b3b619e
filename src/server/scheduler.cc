// Scheduler's admission side: from the wait queues into free slots, each prompt resumed
// from the cache, and warm-ahead made stale by the requests that come (scheduler.h).
#include "server/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/utf8.h"
#include "cache/snapshot_policy.h"
#include "cache/volatile_span.h"
#include "server/engine_loop.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Scheduler::Scheduler(const engine::Model& model, engine::Context& ctx, cache::PrefixCache& cache,
                     const EngineConfig& config, TaskQueue& tasks, StatsBoard& stats, SchedulerHooks& hooks) :
    model_(model), ctx_(ctx), cache_(cache), config_(config), tasks_(tasks), stats_(stats), hooks_(hooks) {
  slots_.resize(static_cast<size_t>(config_.n_parallel));
}

void Scheduler::Schedule() {
  DropCancelled();
  AdmitQueued();
  DropCancelled();
}

int Scheduler::n_busy() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; }));
}

bool Scheduler::ForegroundPrefilling() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s && s->prefilling() && !s->background(); });
}

bool Scheduler::HasForegroundWork() const {
  for (const auto& s : slots_) {
    if (s && !s->background()) return true;
  }
  return ForegroundQueued();
}

void Scheduler::AdmitQueued() {
  ResumePaused();
  if (!paused_.empty()) return;  // a paused request goes first when room returns
  // A prefill put back for room waits until a request ends and frees cells: admitted at
  // once, it would find the same cells taken and go back again, step after step.
  if (wait_for_room_ && n_busy() > 0) return;
  wait_for_room_ = false;
  PreemptBackground();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]) continue;
    std::optional<QueuedTask> q = PopRequest();
    std::optional<QueuedWarmAhead> w;
    if (!q && !HasForegroundWork()) w = PopWarmAhead();
    if (!q && !w) return;
    // A task popped is in no queue and no slot until it is placed: an exception while it
    // is admitted (memory, a library's) ends it here, then fails the step as any other.
    const std::shared_ptr<RequestStream> stream = q ? q->stream : w->stream;
    try {
      if (!(q ? AdmitRequest(std::move(*q), i) : AdmitWarmAhead(std::move(*w), i))) return;
    } catch (...) {
      stream->PushError(Internal("the engine failed while admitting this task"));
      throw;
    }
  }
}

void Scheduler::DropCancelled() {
  const bool foreground_waiting = ForegroundQueued();
  for (auto& slot : slots_) {
    if (!slot) continue;
    if (slot->stream->cancelled() || (slot->background() && foreground_waiting)) {
      hooks_.EndSlot(*slot, api::FinishReason::kCancelled);
    }
  }
  // A paused request whose client gave up ends now, not when room returns.
  for (auto it = paused_.begin(); it != paused_.end();) {
    if (!(*it)->stream->cancelled()) {
      ++it;
      continue;
    }
    std::unique_ptr<Slot> slot = std::move(*it);
    it = paused_.erase(it);
    hooks_.EndSlot(*slot, api::FinishReason::kCancelled);
  }
}

// Whether a prompt of `n_prompt` tokens fits the context; the stream of one that does
// not gets the error.
bool Scheduler::Fits(int n_prompt, RequestStream& stream) const {
  if (n_prompt > 0 && n_prompt < config_.SeqPositions()) return true;
  stream.PushError(OutOfRange("the prompt has " + std::to_string(n_prompt) + " tokens; it must be between 1 and " +
                              std::to_string(config_.SeqPositions() - 1)));
  return false;
}

// The next queued request that fits the context; the others are answered with an error.
std::optional<QueuedTask> Scheduler::PopRequest() {
  while (std::optional<QueuedTask> q = tasks_.PopRequest()) {
    if (Fits(static_cast<int>(q->task.prompt.size()), *q->stream)) return q;
  }
  return std::nullopt;
}

// The next warm-ahead task with something to compute that fits the context.
std::optional<QueuedWarmAhead> Scheduler::PopWarmAhead() {
  while (std::optional<QueuedWarmAhead> q = tasks_.PopWarmAhead()) {
    // Work the cache already holds (a shadow continued the reply in place) has nothing
    // left to compute.
    if (config_.prefix_cache && cache_.Holds(q->task.cache_namespace, q->task.prompt)) {
      q->stream->PushDone({});
      stats_.CountSkippedBackground(1);
      continue;
    }
    if (Fits(static_cast<int>(q->task.prompt.size()), *q->stream)) return q;
  }
  return std::nullopt;
}

// Lends `task` a sequence holding the deepest prefix of its prompt the cache can resume
// (`report` says which); holds nothing when every sequence is lent out even after
// shadows (and, for a restore short of KV cells, background work) gave theirs up;
// `may_take_room` false (warm-ahead): nothing gives way.
cache::SequenceLease Scheduler::LeaseFor(const GenerationTask& task, std::optional<int32_t> max_resume, bool may_take_room,
                                         cache::ResumeReport& report) {
  const auto& prompt = task.prompt;
  const int32_t max_depth = !config_.prefix_cache ? 0 : max_resume.value_or(INT32_MAX);
  const cache::ResumePlan plan =
      cache_.PlanResume(task.cache_namespace, prompt, {.kept_at = task.snapshot_positions, .max_depth = max_depth});
  const int32_t max_reuse = plan.max_reuse;
  cache::SequenceLease lease;
  // A state another replica kept, deeper than this one's cache resumes, comes into RAM
  // first, so the lookups below resume from it.
  cache::SharedImport shared;
  if (config_.prefix_cache && cache_.has_shared()) {
    shared = cache_.ImportShared(task.cache_namespace, prompt, plan.shared_candidates, max_reuse);
    if (!shared.why.empty()) {
      std::fprintf(stderr, "hearth: shared tier: %s; resuming from this replica's cache\n", shared.why.c_str());
    }
  }
  auto acquire = [&] {
    auto lent = cache_.Acquire(task.cache_namespace, prompt, max_reuse, cache::PrefixCache::Lookup::kInternal);
    if (lent) {
      lease = cache::SequenceLease(cache_, lent->seq);
      report = lent->report;
    }
  };
  acquire();
  // Shadows are the first to give their sequence up.
  while (!lease && may_take_room && hooks_.DropYoungestShadow()) acquire();
  // A restore that found no free KV cells (idle cached sequences gave theirs already)
  // gets them from shadows, then from background work (which keeps what it prefilled).
  while (lease && report.no_room && may_take_room && (hooks_.DropYoungestShadow() || EndOneBackground())) {
    lease.Release();
    acquire();
  }
  if (lease && shared.depth > 0 && report.n_reused == shared.depth && report.tier != cache::Tier::kDevice) {
    report.tier = cache::Tier::kShared;  // the state read from the shared tier served
    report.restore_ms += shared.ms;
    report.restored_bytes = std::max(report.restored_bytes, shared.bytes);
  }
  report.shared = shared;
  if (lease) cache_.CountRequestLookup(report);
  return lease;
}

// Lends a sequence from the cache, resumes the prompt, and sets the slot up. False when
// no sequence is free (the task goes back to the front of its queue).
bool Scheduler::AdmitRequest(QueuedTask q, size_t slot_index) {
  cache::ResumeReport report;
  cache::SequenceLease lease = LeaseFor(q.task, std::nullopt, /*may_take_room=*/true, report);
  if (!lease) {
    tasks_.PushFront(std::move(q));
    return false;
  }
  MakeRoomAhead(static_cast<int64_t>(q.task.prompt.size()) - report.n_reused);
  auto slot = std::make_unique<Slot>();
  slot->lease = std::move(lease);
  slot->resume = report;
  slot->n_prompt_done = static_cast<size_t>(report.n_reused);
  slot->n_cached = report.n_reused;
  if (q.first_resume) {  // what it prefilled itself before it was put back is not reuse
    slot->resume = *q.first_resume;
    slot->n_cached = std::min(slot->n_cached, q.first_resume->n_reused);
    slot->resume.n_reused = slot->n_cached;
  }
  slot->stream = std::move(q.stream);
  slot->sampler = std::make_unique<engine::Sampler>(model_, q.task.sampling);
  slot->sampler->Accept(q.task.prompt);
  slot->output = std::make_unique<OutputPipeline>(model_, q.task.stop, q.task.output_format);
  slot->task = std::move(q.task);
  ExplainDivergence(*slot);
  DropWarmAheadCoveredBy(slot->task);
  // What the prompt reuses is known now, before the prefill: a stream reports it at its
  // start (Anthropic's message_start), as the end of the request will.
  slot->stream->PushAdmitted(hooks_.AdmittedUsage(*slot));
  Place(std::move(slot), slot_index);
  return true;
}

// As AdmitRequest, for a prefill with no output; nothing gives way to it.
bool Scheduler::AdmitWarmAhead(QueuedWarmAhead q, size_t slot_index) {
  GenerationTask task;  // what a prefill needs of a task, nothing more
  task.prompt = q.task.prompt;
  task.cache_namespace = q.task.cache_namespace;
  task.snapshot_positions = q.task.snapshot_positions;
  task.received = task.submitted = q.task.submitted;
  cache::ResumeReport report;
  cache::SequenceLease lease = LeaseFor(task, q.task.max_resume, /*may_take_room=*/false, report);
  if (!lease) {
    tasks_.PushFront(std::move(q));
    return false;
  }
  auto slot = std::make_unique<Slot>();
  slot->kind = SlotKind::kWarmAhead;
  slot->lease = std::move(lease);
  slot->resume = report;
  slot->n_prompt_done = static_cast<size_t>(report.n_reused);
  slot->n_cached = report.n_reused;
  slot->stream = std::move(q.stream);
  slot->task = std::move(task);
  slot->n_stale_prefix = q.task.StalePrefix();
  Place(std::move(slot), slot_index);
  return true;
}

// Skips the snapshot positions the resumed prompt is past already and puts the slot in. A
// request keeps no state at a message end a decode too short for the engine's efficient
// batch would end at (SnapshotPolicy::PrefillStops); background work keeps every one (its
// chunks are that long already, and its positions are where the next request resumes).
void Scheduler::Place(std::unique_ptr<Slot> slot, size_t slot_index) {
  if (!slot->background()) {
    const GenerationTask& t = slot->task;
    std::vector<int32_t> kept{t.generation_start, t.moved_spans_start, static_cast<int32_t>(t.prompt.size())};
    for (const auto& bp : t.cache_breakpoints) kept.push_back(bp.position);
    slot->task.snapshot_positions =
        cache::SnapshotPolicy::PrefillStops(t.snapshot_positions, static_cast<int32_t>(slot->n_prompt_done),
                                            ctx_.efficient_batch_floor(), t.generation_start, kept);
    slot->next_snapshot = 0;
  }
  while (slot->next_snapshot < slot->task.snapshot_positions.size() &&
         slot->task.snapshot_positions[slot->next_snapshot] <= static_cast<int32_t>(slot->n_prompt_done)) {
    ++slot->next_snapshot;
  }
  slot->t_admitted = Clock::now();
  slot->shadow_due = static_cast<int32_t>(slot->n_prompt_done) == ShadowFork(slot->task) && config_.prefix_cache &&
                     !slot->background();
  slots_[slot_index] = std::move(slot);
}

// Warm-ahead work for a request that has come is stale: the request computes or reuses
// that prefix itself. A task is covered when the request's prompt begins with its
// prompt's first StalePrefix() tokens.
void Scheduler::DropWarmAheadCoveredBy(const GenerationTask& task) {
  auto covered = [&](const std::string& ns, const std::vector<engine::Token>& prompt, size_t need) {
    return ns == task.cache_namespace && need > 0 && need <= task.prompt.size() &&
           std::equal(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(need), task.prompt.begin());
  };
  for (auto& slot : slots_) {
    if (slot && slot->background() && covered(slot->task.cache_namespace, slot->task.prompt, slot->n_stale_prefix)) {
      hooks_.EndSlot(*slot, api::FinishReason::kCancelled);
    }
  }
  const int64_t n = tasks_.DropBackground(
      [&](const WarmAheadTask& bg) { return covered(bg.cache_namespace, bg.prompt, bg.StalePrefix()); });
  stats_.CountSkippedBackground(n);
}

// When the prompt leaves the cache and rejoins an earlier prompt right after, the span
// in between is per-request content defeating reuse: report it.
void Scheduler::ExplainDivergence(Slot& slot) {
  const auto& prompt = slot.task.prompt;
  const int32_t diverged = slot.resume.n_matched;
  if (diverged <= 0 || diverged + 1 >= static_cast<int32_t>(prompt.size())) return;
  auto earlier = cache_.EarlierContinuation(slot.task.cache_namespace, prompt);
  auto span = cache::FindVolatileSpan(prompt, earlier, diverged);
  if (!span || span->end_new == span->start || span->end_earlier == span->start) return;
  // Spans holding template structure (a dropped <think> scaffold) are the template trap,
  // which warm-ahead handles, not per-request content.
  auto structural = [&](const std::vector<engine::Token>& t, int32_t a, int32_t b) {
    for (int32_t i = a; i < b; ++i) {
      if (model_.IsControl(t[static_cast<size_t>(i)])) return true;
    }
    return false;
  };
  if (structural(prompt, span->start, span->end_new) || structural(earlier, span->start, span->end_earlier)) return;
  api::CacheReport& r = slot.report;
  r.volatile_span = true;
  const auto& marks = slot.task.snapshot_positions;
  r.volatile_message = static_cast<int>(std::count_if(marks.begin(), marks.end(), [&](int32_t p) { return p <= span->start; }));
  auto text = [&](const std::vector<engine::Token>& t, int32_t a, int32_t b) {
    return SanitizeUtf8(model_.Detokenize(std::span(t).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)), true));
  };
  r.volatile_start = span->start;
  r.volatile_end = span->end_new;
  r.volatile_text = text(prompt, span->start, span->end_new);
  // The earlier prompt may be another client's: its text goes to the operator's log, and
  // only with --verbose, never into the response.
  const std::string was = config_.verbose ? " (was \"" + text(earlier, span->start, span->end_earlier) + "\")" : "";
  std::fprintf(stderr,
               "hearth: volatile span in message %d at tokens [%d, %d): \"%s\"%s; the prompt rejoins the cache "
               "right after it: move it to the end of the conversation or start with --stabilize\n",
               r.volatile_message, span->start, span->end_new, r.volatile_text.c_str(), was.c_str());
  stats_.Update([](EngineStats& s) { s.volatile_spans++; });
}

}  // namespace hearth::server
