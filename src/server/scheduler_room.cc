// Scheduler's room side: background work giving way to requests, and the ladder that
// frees KV room when a decode finds none (scheduler.h).
#include <algorithm>
#include <cstdio>
#include <string>

#include "server/engine_loop.h"
#include "server/scheduler.h"

namespace hearth::server {

// The ladder's rungs, cheapest first: a shadow's sequence, an idle cached one, the
// youngest prefill's progress (kept in the cache), the youngest generating request.
bool Scheduler::MakeRoom() {
  return hooks_.DropYoungestShadow() || cache_.EvictIdleDevice() || RequeueYoungestPrefill() ||
         PauseYoungestGenerating();
}

// llama.cpp attends over every KV cell up to the highest one in use, whichever sequence
// holds it, and places a batch in the first free cells from where the last one went (from
// the start when enough lie below). A prefill that the ladder makes room for midway has
// put its first tokens above an idle cached sequence's: all of it then attends over the
// whole cache (on the tiny model a 37k-token prompt after another took 1.2-1.4 times as
// long). So the room is made before its first token. The cells in use are the context's
// count (engine::Context::UsedCells), where a forked sequence's shared cells count once:
// the sequences' lengths summed counted a conversation and its shadow's fork twice, and a
// 40k-token chat moved an idle sequence to RAM at every follow-up's admission (2-7 ms).
void Scheduler::MakeRoomAhead(int64_t n_tokens) {
  while (ctx_.UsedCells() + n_tokens > config_.context.n_ctx && cache_.EvictIdleDevice()) {
  }
}

void Scheduler::Free(const Slot& slot) {
  wait_for_room_ = false;  // its cells, or the cache's hold on them, can be had now
  for (auto& s : slots_) {
    if (s.get() == &slot) s.reset();  // destroys `slot`
  }
}

void Scheduler::FailPaused(const Status& error) {
  for (auto& p : paused_) p->stream->PushError(error);
  paused_.clear();
}

// Puts the most recently admitted prefilling request back at the front of the queue,
// its sequence (with what it prefilled) given to the cache. False when none prefills.
bool Scheduler::RequeueYoungestPrefill() {
  Slot* youngest = nullptr;
  for (auto& slot : slots_) {
    if (slot && slot->prefilling() && !slot->background() &&
        (!youngest || slot->t_admitted > youngest->t_admitted)) {
      youngest = slot.get();
    }
  }
  if (youngest == nullptr) return false;
  hooks_.DropShadow(*youngest, "request requeued");
  QueuedTask q{std::move(youngest->task), youngest->stream, youngest->resume};
  q.first_resume->n_reused = youngest->n_cached;
  const auto done = static_cast<size_t>(ctx_.SeqLength(youngest->lease.seq()));
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
bool Scheduler::PauseYoungestGenerating() {
  Slot* youngest = nullptr;
  int n_generating = 0;
  for (auto& slot : slots_) {
    if (!slot || !slot->pending) continue;
    ++n_generating;
    if (!youngest || slot->t_admitted > youngest->t_admitted) youngest = slot.get();
  }
  if (youngest == nullptr || n_generating < 2) return false;
  hooks_.DropShadow(*youngest, "its request paused");
  std::vector<engine::Token> decoded = youngest->task.prompt;
  decoded.insert(decoded.end(), youngest->generated.begin(), youngest->generated.end());
  decoded.resize(static_cast<size_t>(ctx_.SeqLength(youngest->lease.seq())));  // the pending token is not in yet
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
void Scheduler::ResumePaused() {
  if (paused_.empty()) return;
  for (const auto& s : slots_) {
    if (s && !s->background()) return;
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
  auto lease = cache_.Acquire(slot->task.cache_namespace, decoded, n, kInternal);
  if (!lease) {
    paused_.front() = std::move(slot);
    return;
  }
  paused_.pop_front();
  slot->lease = cache::SequenceLease(cache_, lease->seq);
  *free_slot = std::move(slot);
  if (lease->report.n_reused != n) {
    hooks_.FailSlot(**free_slot, ResourceExhausted("the requests running together outgrew the KV cache (--ctx-size " +
                                             std::to_string(config_.context.n_ctx) +
                                             ") and this one's paused state was evicted; retry it"));
  }
}

// A request waiting takes precedence over warm-ahead: background slots end (keeping what
// they prefilled) before it is admitted, so it resumes from their work.
void Scheduler::PreemptBackground(bool force) {
  if (!force && !tasks_.HasRequests()) return;
  for (auto& slot : slots_) {
    if (slot && slot->background()) hooks_.EndSlot(*slot, api::FinishReason::kCancelled);
  }
}

bool Scheduler::EndOneBackground() {
  for (auto& slot : slots_) {
    if (slot && slot->background()) {
      hooks_.EndSlot(*slot, api::FinishReason::kCancelled);
      return true;
    }
  }
  return false;
}

}  // namespace hearth::server
