// EngineLoop's scheduling, on the engine thread: which task runs in which slot. Admission
// from the queues (resuming each prompt from the cache), warm-ahead giving way to
// requests, cancellation, and the ladder that frees KV room when a decode finds none:
// requeue the youngest prefill, then pause the youngest of several generating requests,
// resumed once the older ones are done.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/utf8.h"
#include "cache/volatile_span.h"
#include "server/engine_loop.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// Puts the most recently admitted prefilling request back at the front of the queue,
// its sequence (with what it prefilled) given to the cache. False when none prefills.
bool EngineLoop::RequeueYoungestPrefill() {
  Slot* youngest = nullptr;
  for (auto& slot : slots_) {
    if (slot && slot->prefilling() && !slot->task.background &&
        (!youngest || slot->t_admitted > youngest->t_admitted)) {
      youngest = slot.get();
    }
  }
  if (youngest == nullptr) return false;
  EndShadow(*youngest, nullptr, "request requeued");
  Queued q{std::move(youngest->task), youngest->stream, youngest->resume};
  q.first_resume->n_reused = youngest->n_cached;
  const auto done = static_cast<size_t>(ctx_->SeqLength(youngest->lease.seq()));
  youngest->lease.Adopt(q.task.cache_namespace, std::span(q.task.prompt).subspan(0, done));
  for (auto& s : slots_) {
    if (s.get() == youngest) s.reset();
  }
  tasks_.PushFront(std::move(q));
  wait_for_room_ = true;
  stats_.Update([](EngineStats& s) { s.requests_requeued++; });
  return true;
}

// Last resort when generating requests together outgrow the KV cells: the youngest one
// pauses. Its sequence goes to the cache (and from there to RAM when cells are needed);
// it resumes where it stopped once the requests running before it are done.
bool EngineLoop::PauseYoungestGenerating() {
  Slot* youngest = nullptr;
  int n_generating = 0;
  for (auto& slot : slots_) {
    if (!slot || !slot->pending) continue;
    ++n_generating;
    if (!youngest || slot->t_admitted > youngest->t_admitted) youngest = slot.get();
  }
  if (youngest == nullptr || n_generating < 2) return false;
  EndShadow(*youngest, nullptr, "its request paused");
  std::vector<engine::Token> decoded = youngest->task.prompt;
  decoded.insert(decoded.end(), youngest->generated.begin(), youngest->generated.end());
  decoded.resize(static_cast<size_t>(ctx_->SeqLength(youngest->lease.seq())));  // the pending token is not in yet
  youngest->lease.Adopt(youngest->task.cache_namespace, decoded);  // the cache's now
  youngest->in_batch = false;
  youngest->logits_index.reset();
  for (auto& s : slots_) {
    if (s.get() == youngest) paused_.push_back(std::move(s));
  }
  std::fprintf(stderr, "hearth: paused a request at %zu tokens: the requests running together outgrew the KV cache "
               "(--ctx-size %d); it resumes when the older ones are done\n", decoded.size(), config_.context.n_ctx);
  stats_.Update([](EngineStats& s) { s.requests_paused++; });
  return true;
}

// Resumes the oldest paused request once nothing else runs. A paused request whose
// states left the cache meanwhile ends with the error it used to get at once.
void EngineLoop::ResumePaused() {
  if (paused_.empty()) return;
  for (const auto& s : slots_) {
    if (s && !s->task.background) return;
  }
  PreemptBackground(/*force=*/true);
  auto free_slot = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return s == nullptr; });
  if (free_slot == slots_.end()) return;
  std::unique_ptr<Slot> slot = std::move(paused_.front());
  std::vector<engine::Token> decoded = slot->task.prompt;
  decoded.insert(decoded.end(), slot->generated.begin(), slot->generated.end() - (slot->pending ? 1 : 0));
  const auto n = static_cast<int32_t>(decoded.size());
  constexpr auto kInternal = cache::PrefixCache::Lookup::kInternal;
  // Restoring it may need the KV cells that idle cached sequences hold: Acquire frees
  // them (nothing else runs now).
  auto lease = cache_->Acquire(slot->task.cache_namespace, decoded, n, kInternal);
  if (!lease) {
    paused_.front() = std::move(slot);
    return;
  }
  paused_.pop_front();
  slot->lease = cache::SequenceLease(*cache_, lease->seq);
  *free_slot = std::move(slot);
  if (lease->report.n_reused != n) {
    FailSlot(**free_slot, ResourceExhausted("the requests running together outgrew the KV cache (--ctx-size " +
                                             std::to_string(config_.context.n_ctx) +
                                             ") and this one's paused state was evicted; retry it"));
  }
}

bool EngineLoop::HasForegroundWork() {
  for (const auto& s : slots_) {
    if (s && !s->task.background) return true;
  }
  return ForegroundQueued();
}

// A request waiting takes precedence over warm-ahead: background slots end (keeping what
// they prefilled) before it is admitted, so it resumes from their work.
void EngineLoop::PreemptBackground(bool force) {
  if (!force && !tasks_.HasRequests()) return;
  for (auto& slot : slots_) {
    if (slot && slot->task.background) Finish(*slot, api::FinishReason::kCancelled);
  }
}

bool EngineLoop::EndOneBackground() {
  for (auto& slot : slots_) {
    if (slot && slot->task.background) {
      Finish(*slot, api::FinishReason::kCancelled);
      return true;
    }
  }
  return false;
}

void EngineLoop::AdmitQueued() {
  ResumePaused();
  if (!paused_.empty()) return;  // a paused request goes first when room returns
  // A prefill put back for room waits until a request ends and frees cells: admitted at
  // once, it would find the same cells taken and go back again, step after step.
  if (wait_for_room_ && std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; })) return;
  wait_for_room_ = false;
  PreemptBackground();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]) continue;
    std::optional<Queued> q = PopValidTask(/*background=*/false);
    if (!q && !HasForegroundWork()) q = PopValidTask(/*background=*/true);
    if (!q) return;
    if (!Admit(std::move(*q), i)) return;
  }
}

// Lends `task` a sequence holding the deepest prefix of its prompt the cache can resume
// (`report` says which); holds nothing when every sequence is lent out even after
// shadows (and, for a restore short of KV cells, background work) gave theirs up.
cache::SequenceLease EngineLoop::LeaseFor(const GenerationTask& task, cache::ResumeReport& report) {
  const auto& prompt = task.prompt;
  const int32_t max_depth = !config_.prefix_cache ? 0 : task.max_resume >= 0 ? task.max_resume : INT32_MAX;
  const cache::ResumePlan plan = cache_->PlanResume(task.cache_namespace, prompt,
                                                    {.kept_at = task.snapshot_positions, .max_depth = max_depth});
  const int32_t max_reuse = plan.max_reuse;
  cache::SequenceLease lease;
  // A state another replica kept, deeper than this one's cache resumes, comes into RAM
  // first, so the lookups below resume from it.
  cache::SharedImport shared;
  if (config_.prefix_cache && cache_->has_shared()) {
    shared = cache_->ImportShared(task.cache_namespace, prompt, plan.shared_candidates, max_reuse);
    if (!shared.why.empty()) {
      std::fprintf(stderr, "hearth: shared tier: %s; resuming from this replica's cache\n", shared.why.c_str());
    }
  }
  auto acquire = [&] {
    auto lent = cache_->Acquire(task.cache_namespace, prompt, max_reuse, cache::PrefixCache::Lookup::kInternal);
    if (lent) {
      lease = cache::SequenceLease(*cache_, lent->seq);
      report = lent->report;
    }
  };
  acquire();
  // Shadows are the first to give their sequence up.
  while (!lease && !task.background && DropOneShadow()) acquire();
  // A restore that found no free KV cells (idle cached sequences gave theirs already)
  // gets them from shadows, then from background work (which keeps what it prefilled).
  while (lease && report.no_room && !task.background && (DropOneShadow() || EndOneBackground())) {
    lease.Release();
    acquire();
  }
  if (lease && shared.depth > 0 && report.n_reused == shared.depth && report.tier != cache::Tier::kDevice) {
    report.tier = cache::Tier::kShared;  // the state read from the shared tier served
    report.restore_ms += shared.ms;
    report.restored_bytes = std::max(report.restored_bytes, shared.bytes);
  }
  report.shared = shared;
  if (lease) cache_->CountRequestLookup(report);
  return lease;
}

// Lends a sequence from the cache, resumes the prompt, and sets the slot up. False when
// no sequence is free (the task goes back to the front of its queue).
bool EngineLoop::Admit(Queued q, size_t slot_index) {
  cache::ResumeReport report;
  cache::SequenceLease lease = LeaseFor(q.task, report);
  if (!lease) {
    tasks_.PushFront(std::move(q));
    return false;
  }
  const auto& prompt = q.task.prompt;
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
  const bool chat = q.task.output_format.has_value();
  if (!q.task.background) {
    slot->sampler = std::make_unique<engine::Sampler>(model_, q.task.sampling);
    slot->sampler->Accept(prompt);
    slot->detokenizer = std::make_unique<engine::Detokenizer>(model_, /*render_special=*/chat);
    slot->stops = std::make_unique<engine::StopStrings>(q.task.stop);
    if (chat) slot->parser = std::make_unique<engine::OutputParser>(*q.task.output_format);
  }
  slot->task = std::move(q.task);
  if (!slot->task.background) {
    ExplainDivergence(*slot);
    DropWarmAheadCoveredBy(slot->task);
    // What the prompt reuses is known now, before the prefill: a stream reports it at
    // its start (Anthropic's message_start), as the end of the request will.
    slot->stream->PushAdmitted(UsageSoFar(*slot));
  }
  while (slot->next_snapshot < slot->task.snapshot_positions.size() &&
         slot->task.snapshot_positions[slot->next_snapshot] <= static_cast<int32_t>(slot->n_prompt_done)) {
    ++slot->next_snapshot;
  }
  slot->t_admitted = Clock::now();
  slot->shadow_due = static_cast<int32_t>(slot->n_prompt_done) == ShadowFork(slot->task) && config_.prefix_cache;
  slots_[slot_index] = std::move(slot);
  return true;
}

// Warm-ahead work for a request that has come is stale: the request computes or reuses
// that prefix itself. A task is covered when the request's prompt begins with its prompt,
// or, for a cut-off reply's task, with its prompt up to where the reply's uncertain end
// begins (max_resume: the client may have read less than was written).
void EngineLoop::DropWarmAheadCoveredBy(const GenerationTask& task) {
  auto covered = [&](const GenerationTask& bg) {
    const size_t need = bg.max_resume >= 0 ? std::min(bg.prompt.size(), static_cast<size_t>(bg.max_resume))
                                           : bg.prompt.size();
    return bg.cache_namespace == task.cache_namespace && need > 0 && need <= task.prompt.size() &&
           std::equal(bg.prompt.begin(), bg.prompt.begin() + static_cast<std::ptrdiff_t>(need), task.prompt.begin());
  };
  for (auto& slot : slots_) {
    if (slot && slot->task.background && covered(slot->task)) Finish(*slot, api::FinishReason::kCancelled);
  }
  const int64_t n = tasks_.DropBackground(covered);
  stats_.CountSkippedBackground(n);
}

// When the prompt leaves the cache and rejoins an earlier prompt right after, the span
// in between is per-request content defeating reuse: report it.
void EngineLoop::ExplainDivergence(Slot& slot) {
  const auto& prompt = slot.task.prompt;
  const int32_t diverged = slot.resume.n_matched;
  if (diverged <= 0 || diverged + 1 >= static_cast<int32_t>(prompt.size())) return;
  auto earlier = cache_->EarlierContinuation(slot.task.cache_namespace, prompt);
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

// The next queued task that fits the context; the others are answered with an error.
std::optional<EngineLoop::Queued> EngineLoop::PopValidTask(bool background) {
  while (true) {
    std::optional<Queued> popped = tasks_.Pop(background);
    if (!popped) return std::nullopt;
    Queued q = std::move(*popped);
    const int n_prompt = static_cast<int>(q.task.prompt.size());
    // Background work the cache already holds (a shadow continued the reply in place)
    // has nothing left to compute.
    if (background && config_.prefix_cache && cache_->Holds(q.task.cache_namespace, q.task.prompt)) {
      q.stream->PushDone({});
      stats_.CountSkippedBackground(1);
      continue;
    }
    if (n_prompt > 0 && n_prompt < config_.SeqPositions()) return q;
    q.stream->PushError(OutOfRange("the prompt has " + std::to_string(n_prompt) + " tokens; it must be between 1 and " +
                                   std::to_string(config_.SeqPositions() - 1)));
  }
}

size_t EngineLoop::QueuedSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const {
  return tasks_.RequestsSharedPrefix(ns, tokens);
}

bool EngineLoop::ForegroundPrefilling() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s && s->prefilling() && !s->task.background; });
}

bool EngineLoop::ForegroundQueued() const { return tasks_.HasRequests(); }

void EngineLoop::DropCancelled() {
  const bool foreground_waiting = ForegroundQueued();
  for (auto& slot : slots_) {
    if (!slot) continue;
    if (slot->stream->cancelled() || (slot->task.background && foreground_waiting)) {
      Finish(*slot, api::FinishReason::kCancelled);
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
    Finish(*slot, api::FinishReason::kCancelled);
  }
}

}  // namespace hearth::server
