// What GET /v1/cache shows of the engine: the cache summary the loop publishes, and the
// requests it finished. Kept apart from the loop proper: the loop only calls Summarize
// (on its own thread, publishing the result under summary_mu_) and RecordRequest.
#include <xxhash.h>

#include <chrono>

#include "server/engine_loop.h"
#include "server/cache_view.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

cache::CacheSummary EngineLoop::Summarize() const {
  cache::CacheSummary summary = cache::SummarizeCache(*cache_);
  summary.disk_unavailable = disk_unavailable_;
  if (shared_) summary.shared = shared_->stats();
  return summary;
}

std::shared_ptr<const cache::CacheSummary> EngineLoop::CacheSnapshot() const {
  std::lock_guard<std::mutex> lock(summary_mu_);
  return cache_summary_;
}

std::string EngineLoop::DescribeCache() const { return FormatCacheSummary(*CacheSnapshot(), RecentRequests()); }

// The same numbers as LogRequest's line: ttft from the HTTP request being read.
void EngineLoop::RecordRequest(const Slot& slot, const char* outcome) {
  const auto now = Clock::now();
  const bool first = !slot.generated.empty() || slot.t_prefilled != Clock::time_point{};
  RequestRecord r;
  r.finished_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.ns = slot.task.cache_namespace;
  r.ns_id = XXH3_64bits(r.ns.data(), r.ns.size());
  r.outcome = outcome;
  r.n_prompt = static_cast<int>(slot.task.prompt.size());
  r.n_reused = slot.n_cached;
  r.n_matched = slot.resume.n_matched;
  r.n_prefilled = static_cast<int>(slot.n_prompt_done) - slot.n_cached;
  r.n_generated = static_cast<int>(slot.generated.size());
  if (slot.n_cached > 0) r.tier = cache::TierName(slot.resume.tier);
  r.restore_ms = slot.resume.restore_ms;
  if (slot.t_admitted != Clock::time_point{}) r.prefill_ms = first ? Ms(slot.t_admitted, slot.t_prefilled) : Ms(slot.t_admitted, now);
  if (first) r.ttft_ms = Ms(slot.task.received, slot.t_first_token);
  r.stopped_because = slot.resume.stopped_because;
  recent_.Add(std::move(r));
}

}  // namespace hearth::server
