#include "server/metrics.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include <nlohmann/json.hpp>

namespace hearth::server {
namespace {

void Describe(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP hearth_") + name + " " + help + "\n";
  *out += std::string("# TYPE hearth_") + name + " " + type + "\n";
}

void Add(std::string* out, const char* name, const char* type, const char* help, int64_t value) {
  Describe(out, name, type, help);
  *out += std::string("hearth_") + name + " " + std::to_string(value) + "\n";
}

// A family with one label: HELP and TYPE once, then one sample per value of the label.
void AddFamily(std::string* out, const char* name, const char* type, const char* help, const char* label,
               std::initializer_list<std::pair<const char*, int64_t>> samples) {
  Describe(out, name, type, help);
  for (const auto& [label_value, value] : samples) {
    *out += std::string("hearth_") + name + "{" + label + "=\"" + label_value + "\"} " + std::to_string(value) + "\n";
  }
}

void AddRequestMetrics(std::string* out, const EngineStats& s) {
  Add(out, "requests_finished_total", "counter", "Requests that ended normally or were cancelled.", s.requests_finished);
  Add(out, "requests_cancelled_total", "counter", "Requests cancelled by their client.", s.requests_cancelled);
  Add(out, "requests_failed_total", "counter", "Requests that ended with an error.", s.requests_failed);
  Add(out, "requests_paused_total", "counter",
      "Requests paused because the ones running together outgrew the KV cache.", s.requests_paused);
  Add(out, "requests_requeued_total", "counter",
      "Prefilling requests put back in the queue because the ones running together outgrew the KV cache.",
      s.requests_requeued);
  Add(out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", s.prompt_tokens);
  Add(out, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from the cache.", s.prompt_tokens_cached);
  Add(out, "prompt_tokens_prefilled_total", "counter", "Prompt tokens computed at request time.",
      s.prompt_tokens_prefilled);
  Add(out, "generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  Add(out, "decode_calls_total", "counter", "Batches decoded.", s.decode_calls);
  Add(out, "slots_busy", "gauge", "Sequences generating or prefilling now.", s.slots_busy);
  Add(out, "requests_queued", "gauge", "Requests waiting for a free sequence.", s.queued);
}

// Hits, misses, snapshots and bytes per tier (the shared tier's own metrics aside).
void AddCacheMetrics(std::string* out, const cache::CacheStats& c) {
  AddFamily(out, "cache_hits_total", "counter", "Requests that resumed from the cache, by tier.", "tier",
            {{"device", c.hits_device}, {"ram", c.hits_ram}, {"disk", c.hits_disk}, {"shared", c.hits_shared}});
  Add(out, "cache_misses_total", "counter", "Requests that found nothing to resume from.", c.misses);
  Add(out, "cache_snapshots_taken_total", "counter", "States stored in RAM or on disk.", c.snapshots_taken);
  Add(out, "cache_snapshots_evicted_total", "counter", "States dropped or moved down a tier.", c.snapshots_evicted);
  Add(out, "cache_snapshots_quarantined_total", "counter", "Corrupt or foreign disk states set aside.",
      c.snapshots_quarantined);
  AddFamily(out, "cache_disk_errors_total", "counter",
            "Disk tier reads and writes that failed (I/O error, full disk).", "op",
            {{"read", c.disk_read_errors}, {"write", c.disk_write_errors}});
  AddFamily(out, "cache_bytes", "gauge", "Bytes held by cached states, by tier.", "tier",
            {{"ram", static_cast<int64_t>(c.bytes_ram)}, {"disk", static_cast<int64_t>(c.bytes_disk)}});
}

// --cache-redis only.
void AddSharedTierMetrics(std::string* out, const cache::SharedStats& sh) {
  Add(out, "cache_shared_up", "gauge", "1 while the last exchange with the shared tier succeeded.", sh.connected ? 1 : 0);
  AddFamily(out, "cache_shared_states_total", "counter",
            "States given to the shared tier: queued, written whole, dropped.", "outcome",
            {{"queued", sh.puts}, {"written", sh.written}, {"dropped", sh.dropped}});
  AddFamily(out, "cache_shared_lookups_total", "counter",
            "Lookups in the shared tier: hits, misses, misses with a cause.", "outcome",
            {{"hit", sh.hits}, {"miss", sh.misses - sh.lookup_errors}, {"error", sh.lookup_errors}});
  AddFamily(out, "cache_shared_bytes_total", "counter", "Bytes written to and read from the shared tier.", "op",
            {{"write", sh.bytes_written}, {"read", sh.bytes_read}});
}

// What the cache holds, what cut its reuse short, and the work done ahead of requests.
void AddHoldingsAndBackgroundMetrics(std::string* out, const EngineStats& s) {
  Add(out, "cache_device_sequences", "gauge", "Idle conversations kept on the device.", s.cache.device_cached);
  Add(out, "cache_nodes", "gauge", "Nodes of the prefix tree.", static_cast<int64_t>(s.cache.n_nodes));
  Add(out, "volatile_spans_total", "counter", "Prompts whose reuse a per-request span cut short.", s.volatile_spans);
  Add(out, "warm_ahead_tasks_total", "counter", "Background prefills of a next turn (skipped ones included).",
      s.background_tasks);
  Add(out, "warm_ahead_skipped_total", "counter",
      "Background prefills skipped: the cache held their prompt, or the request they prepared for came first.",
      s.background_skipped);
  Add(out, "warm_ahead_failed_total", "counter",
      "Background prefills that ended with an error (requests_failed_total counts requests only).",
      s.background_failed);
  Add(out, "warm_ahead_tokens_total", "counter", "Tokens prefilled in the background.", s.background_tokens);
  Add(out, "shadow_tokens_total", "counter", "Tokens of re-rendered replies prefilled while they were generated.",
      s.shadow_tokens);
  Add(out, "shadow_tokens_with_decode_total", "counter",
      "Of those, tokens fed in the reply's own decode steps (the rest when the reply ended).",
      s.shadow_tokens_with_decode);
  Add(out, "shadow_renders_total", "counter",
      "Replies handed to the chat template so far to re-render them for a shadow's target.", s.shadow_renders);
  Add(out, "shadows_kept_total", "counter", "Shadow sequences given to the cache when their reply ended.",
      s.shadows_kept);
  Add(out, "shadows_dropped_total", "counter",
      "Shadow sequences released (reply cut off or diverged, room needed, failure).", s.shadows_dropped);
}

}  // namespace

std::string FormatPrometheus(const EngineStats& s) {
  std::string out;
  AddRequestMetrics(&out, s);
  AddCacheMetrics(&out, s.cache);
  if (s.shared) AddSharedTierMetrics(&out, *s.shared);
  AddHoldingsAndBackgroundMetrics(&out, s);
  return out;
}

std::string FormatTemplateMetrics(int64_t renders_spliced) {
  std::string out;
  Add(&out, "renders_spliced_total", "counter",
      "Requests whose prompt was spliced from warm-ahead's rendering of their conversation instead of rendered whole.",
      renders_spliced);
  return out;
}

}  // namespace hearth::server

namespace hearth::server {
namespace {

// Seconds: ten milliseconds to two minutes for whole phases of a request; sub-millisecond
// up for restores, which copy bytes rather than compute.
const std::vector<double> kPhaseBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
const std::vector<double> kDecodeBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
const std::vector<double> kRestoreBuckets = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
const char* const kTiers[] = {"device", "ram", "disk", "shared"};

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size(), 0) {}

void Histogram::Observe(double value) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += value;
}

std::string Histogram::Samples(const std::string& name, const std::string& labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + sep + "le=\"" + Number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + labels + sep + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + Number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
  return out;
}

RequestMetrics::RequestMetrics()
    : ttft_(kPhaseBuckets), prefill_(kPhaseBuckets), decode_(kDecodeBuckets), queue_(kPhaseBuckets) {
  for (const char* tier : kTiers) restore_.emplace(tier, Histogram(kRestoreBuckets));
}

void RequestMetrics::Record(const api::Completion& c) {
  if (!c.timings) return;
  const api::Timings& t = *c.timings;
  std::lock_guard<std::mutex> lock(mu_);
  queue_.Observe(t.queued_s);
  prefill_.Observe(t.prefill_s);
  if (t.ttft_s) {
    ttft_.Observe(*t.ttft_s);
    decode_.Observe(t.decode_s);
  }
  if (c.usage.cache && c.usage.cache->reused_tokens > 0) {
    auto it = restore_.find(c.usage.cache->tier);
    if (it != restore_.end()) it->second.Observe(c.usage.cache->restore_ms / 1000.0);
  }
}

std::string RequestMetrics::FormatPrometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Describe(&out, "time_to_first_token_seconds", "histogram",
           "From the HTTP request being read to its first generated token, per request that produced one.");
  out += ttft_.Samples("hearth_time_to_first_token_seconds", "");
  Describe(&out, "request_prefill_seconds", "histogram",
           "From admission into a slot to the first token (the prompt's prefill, after what the cache restored).");
  out += prefill_.Samples("hearth_request_prefill_seconds", "");
  Describe(&out, "request_decode_seconds", "histogram", "From the first token to the end of the request.");
  out += decode_.Samples("hearth_request_decode_seconds", "");
  Describe(&out, "request_queue_wait_seconds", "histogram",
           "From submission to the engine to admission into a slot.");
  out += queue_.Samples("hearth_request_queue_wait_seconds", "");
  Describe(&out, "cache_restore_seconds", "histogram",
           "Restoring a request's reused prefix, by the tier it came from.");
  for (const char* tier : kTiers) {
    out += restore_.at(tier).Samples("hearth_cache_restore_seconds", std::string("tier=\"") + tier + "\"");
  }
  return out;
}

}  // namespace hearth::server
