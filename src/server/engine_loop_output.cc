// EngineLoop's output side, on the engine thread: a sampled token through the request's
// OutputPipeline to its stream; a request's end: its completion and usage, its shadow,
// its log line, and its sequence back to the cache.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cache/snapshot_policy.h"
#include "server/engine_loop.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

void EngineLoop::EmitToken(Slot& slot, engine::Token token) {
  if (model_.IsEndOfGeneration(token)) {
    Finish(slot, api::FinishReason::kStop);
    return;
  }
  slot.generated.push_back(token);
  OutputPipeline::Pushed out = slot.output->Push(token);
  for (api::Delta& delta : out.deltas) slot.stream->PushDelta(std::move(delta));
  if (slot.shadow) shadows_->PostProgress(slot);
  if (out.stopped) {
    Finish(slot, api::FinishReason::kStopSequence, out.matched);
  } else if (static_cast<int>(slot.generated.size()) >= slot.task.max_tokens ||
             ctx_->SeqLength(slot.lease.seq()) + 1 >= config_.SeqPositions()) {
    Finish(slot, api::FinishReason::kLength);
  } else {
    slot.pending = token;
  }
}

// The reply is over: what the output pipeline still holds goes out, and the completion
// is what was streamed, with the request's usage and timings.
api::Completion EngineLoop::CompleteOutput(Slot& slot, api::FinishReason reason, std::string stop_sequence) {
  OutputPipeline::Completed out = slot.output->Complete(reason, std::move(stop_sequence));
  for (api::Delta& delta : out.deltas) slot.stream->PushDelta(std::move(delta));
  api::Completion c = std::move(out.completion);
  c.usage = UsageSoFar(slot);
  c.usage.cache->prefilled_tokens = static_cast<int>(slot.n_prompt_done) - slot.n_cached;
  c.timings = TimingsOf(slot, Clock::now());
  return c;
}

void EngineLoop::Finish(Slot& slot, api::FinishReason reason, std::string stop_sequence) {
  if (slot.background()) {
    slot.stream->PushDone({});
    stats_.Update([&](EngineStats& s) {
      s.background_tasks++;
      s.background_tokens += static_cast<int64_t>(slot.n_prompt_done) - slot.n_cached;
    });
    Release(slot, /*keep_in_cache=*/true);
    return;
  }
  api::Completion c = CompleteOutput(slot, reason, std::move(stop_sequence));
  stats_.Update([&](EngineStats& s) {
    s.requests_finished++;
    if (reason == api::FinishReason::kCancelled) s.requests_cancelled++;
    s.generated_tokens += static_cast<int64_t>(slot.generated.size());
  });
  LogRequest(slot, reason == api::FinishReason::kCancelled ? "cancelled" : "done");
  RecordRequest(slot, reason == api::FinishReason::kCancelled ? "cancelled" : "done");
  // A cut-off client sends back what it received, not what was generated after.
  auto delivered = reason == api::FinishReason::kCancelled ? slot.stream->delivered() : std::nullopt;
  if (delivered) {  // its own usage and timings, for the finished callback
    delivered->usage = c.usage;
    delivered->timings = c.timings;
  }
  // A cut-off reply: the shadow is kept when what was delivered begins with what it was
  // fed from, and goes on through the end of what was delivered when its target can be
  // continued there (a client answering at once sends exactly that back); it is never
  // fed past it. Warm-ahead still snapshots the reply's last positions (max_resume) for
  // a client that read less.
  if (reason == api::FinishReason::kCancelled) {
    const api::Completion sent = delivered ? *delivered : api::Completion{};
    EndShadow(slot, &sent, "reply cut off", /*cut_off=*/true);
  } else {
    EndShadow(slot, &c);
  }
  if (on_finished_) on_finished_(slot.task, delivered ? *delivered : c);
  // What this request wrote is known once its sequence is in the cache.
  const std::shared_ptr<RequestStream> stream = slot.stream;
  const std::string ns = slot.task.cache_namespace;
  const std::vector<engine::Token> prompt = slot.task.prompt;
  const int n_cached = slot.n_cached;
  Release(slot, /*keep_in_cache=*/true);  // destroys `slot`
  c.usage.cache_written_tokens = CacheWritten(ns, prompt, n_cached);
  if (c.usage.cache) c.usage.cache->written_tokens = c.usage.cache_written_tokens;
  stream->PushDone(std::move(c));
}

// Prompt tokens past the reused ones that the cache can now resume through: up to the
// deepest position of the prompt where a later request could resume.
int EngineLoop::CacheWritten(const std::string& ns, const std::vector<engine::Token>& prompt, int n_cached) {
  if (!config_.prefix_cache) return 0;
  return std::max(0, cache_->ResumableDepth(ns, prompt) - n_cached);
}

// Holds the state the conversation's next turn resumes from (the request's own, or its
// kept shadow's), and the states at the client's cache breakpoints.
void EngineLoop::HoldNewest(Slot& slot, std::span<const engine::Token> tokens) {
  if (!config_.prefix_cache || slot.newest_held) return;
  const GenerationTask& t = slot.task;
  const int seconds = t.newest_hold_seconds > 0 ? t.newest_hold_seconds : config_.cache_pin_minutes * 60;
  slot.newest_held = true;
  if (seconds > 0) {
    cache_->Hold(t.cache_namespace, tokens,
                 {.duration = std::chrono::seconds(seconds), .newest = true, .conversation = t.cache_conversation});
  }
  for (const auto& bp : t.cache_breakpoints) {
    if (bp.position > static_cast<int32_t>(t.prompt.size())) continue;
    cache_->Hold(t.cache_namespace, std::span(t.prompt).subspan(0, static_cast<size_t>(bp.position)),
                 {.duration = std::chrono::seconds(bp.ttl_seconds)});
  }
}

// The slot's usage and cache report; at admission prefilled_tokens is what is left to
// prefill, at the end what was.
api::Usage EngineLoop::UsageSoFar(const Slot& slot) const {
  api::Usage u;
  u.prompt_tokens = static_cast<int>(slot.task.prompt.size());
  u.completion_tokens = static_cast<int>(slot.generated.size());
  u.cached_tokens = slot.n_cached;
  // What the request will have written once it ends: its sequence goes to the cache with
  // the whole prompt (Finish replaces this with what the cache then holds).
  if (config_.prefix_cache) u.cache_written_tokens = u.prompt_tokens - slot.n_cached;
  api::CacheReport report = slot.report;
  report.reused_tokens = slot.n_cached;
  report.prefilled_tokens = u.prompt_tokens - slot.n_cached;
  if (slot.n_cached > 0) report.tier = cache::TierName(slot.resume.tier);
  report.restore_ms = slot.resume.restore_ms;
  report.restored_bytes = slot.resume.restored_bytes;
  report.stopped_because = slot.resume.stopped_because;
  report.shared_miss = slot.resume.shared.why;
  report.written_tokens = u.cache_written_tokens;
  u.cache = std::move(report);
  return u;
}

// A drain may stop early for a request waiting in the queue, and go exactly as far as
// one that continues this reply (ShadowPrefill::Finish).
void EngineLoop::EndShadow(Slot& slot, const api::Completion* final_reply, const char* why, bool cut_off) {
  if (final_reply == nullptr) {
    shadows_->Drop(slot, why);
    return;
  }
  const auto queued = [&](std::span<const engine::Token> tokens) -> std::optional<size_t> {
    if (!ForegroundQueued()) return std::nullopt;
    return QueuedSharedPrefix(slot.task.cache_namespace, tokens);
  };
  // The next turn resumes from the re-rendered reply.
  if (auto kept = shadows_->Finish(slot, *final_reply, cut_off, queued)) HoldNewest(slot, *kept);
}

void EngineLoop::FailSlot(Slot& slot, const Status& error) {
  const bool background = slot.background();
  stats_.Update([&](EngineStats& s) { ++(background ? s.background_failed : s.requests_failed); });
  std::fprintf(stderr, "hearth: %s failed: %s\n", background ? "warm-ahead" : "request", error.ToString().c_str());
  if (!background) RecordRequest(slot, "failed");
  EndShadow(slot, nullptr, "request failed");
  slot.stream->PushError(error);
  Release(slot, /*keep_in_cache=*/false);
}

// Gives the slot's sequence back to the cache: with everything it computed (prompt and
// decoded tokens, also when cancelled half way), or empty after a failure.
void EngineLoop::Release(Slot& slot, bool keep_in_cache) {
  if (!slot.lease) {
    // Paused: its sequence went to the cache already.
  } else if (keep_in_cache && config_.prefix_cache) {
    std::vector<engine::Token> history = slot.task.prompt;
    history.insert(history.end(), slot.generated.begin(), slot.generated.end());
    history.resize(std::min(history.size(), static_cast<size_t>(ctx_->SeqLength(slot.lease.seq()))));
    // A request's reply starts where its shadow forks (warm-ahead renders the same).
    slot.lease.Adopt(slot.task.cache_namespace, history,
                     cache::SnapshotPolicy::AdoptedTailStart(slot.background(), ShadowFork(slot.task)));
    HoldNewest(slot, history);
  } else {
    slot.lease.Release();
  }
  scheduler_->Free(slot);  // destroys `slot`; its cells, or the cache's hold on them, can be had now
  stats_.Update([&](EngineStats& s) { s.slots_busy = BusySlots(); });
}

// One line per request: what was reused and from where, what was computed, and why
// reuse stopped where it did. prep_ms: from the HTTP request being read (or the task's
// submission) to its admission: parsing, rendering, tokenizing, queueing, the cache's
// lookup and restore. ttft_ms counts from the same point.
void EngineLoop::LogRequest(const Slot& slot, const char* outcome) const {
  const auto now = Clock::now();
  const int n_prompt = static_cast<int>(slot.task.prompt.size());
  const bool first = !slot.generated.empty() || slot.t_prefilled != Clock::time_point{};
  const Clock::time_point start = slot.task.received;
  std::fprintf(stderr,
               "hearth: %s prompt=%d reused=%d (%s, %.1f ms, %.2f MiB) prep_ms=%.1f prefilled=%d prefill_ms=%.1f "
               "generated=%zu ttft_ms=%.1f%s%s\n",
               outcome, n_prompt, slot.n_cached, cache::TierName(slot.resume.tier), slot.resume.restore_ms,
               static_cast<double>(slot.resume.restored_bytes) / (1024.0 * 1024.0), Ms(start, slot.t_admitted),
               static_cast<int>(slot.n_prompt_done) - slot.n_cached,
               first ? Ms(slot.t_admitted, slot.t_prefilled) : Ms(slot.t_admitted, now), slot.generated.size(),
               first ? Ms(start, slot.t_first_token) : -1.0,
               slot.resume.stopped_because.empty() ? "" : " reuse_stopped: ", slot.resume.stopped_because.c_str());
}

}  // namespace hearth::server
