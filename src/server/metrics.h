// Prometheus text exposition of the engine's counters and of per-request latency
// histograms (GET /metrics); docs/metrics.md lists every series. The prefix cache's
// summary (GET /v1/cache) is cache_view.h.
//
// Threads: the Format functions are pure; RequestMetrics may be used from any thread
// (the engine loop records, HTTP workers format).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/types.h"
#include "server/engine_loop.h"

namespace hearth::server {

// A Prometheus histogram: counts per bucket of observed values (seconds), their sum and
// number. Not thread-safe on its own.
class Histogram {
 public:
  // REQUIRES: `upper_bounds` ascending. The +Inf bucket is implied.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // The _bucket (cumulative, `le` last among the labels), _sum and _count lines of
  // `name`; `labels` ("tier=\"ram\"" or "") goes first in each.
  std::string Samples(const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // counts_[i]: values <= bounds_[i] and > bounds_[i - 1]
  uint64_t count_ = 0;            // every value, the +Inf bucket's
  double sum_ = 0;
};

// The latency histograms, fed with each finished request's timings and cache report
// (api::Completion::timings, usage.cache). Requests that fail and background work are
// not recorded.
class RequestMetrics {
 public:
  RequestMetrics();
  // Records `c` when it carries timings (the engine sets them when a request ends).
  void Record(const api::Completion& c);
  // HELP, TYPE and samples of every histogram.
  std::string FormatPrometheus() const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;      // guarded by mu_
  Histogram prefill_;   // guarded by mu_
  Histogram decode_;    // guarded by mu_
  Histogram queue_;     // guarded by mu_
  std::map<std::string, Histogram> restore_;  // by tier; guarded by mu_
};

// Every metric is prefixed "hearth_"; counters end in "_total".
std::string FormatPrometheus(const EngineStats& stats);
// The chat template's: `renders_spliced`, engine::ChatTemplate::n_spliced.
std::string FormatTemplateMetrics(int64_t renders_spliced);

}  // namespace hearth::server
