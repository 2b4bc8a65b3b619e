#include "server/metrics.h"

#include <cstdint>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace hearth::server {
namespace {

void Add(std::string* out, const char* name, const char* type, const char* help, int64_t value) {
  *out += std::string("# HELP hearth_") + name + " " + help + "\n";
  *out += std::string("# TYPE hearth_") + name + " " + type + "\n";
  *out += std::string("hearth_") + name + " " + std::to_string(value) + "\n";
}

}  // namespace

std::string FormatPrometheus(const EngineStats& s) {
  std::string out;
  Add(&out, "requests_finished_total", "counter", "Requests that ended normally or were cancelled.", s.requests_finished);
  Add(&out, "requests_cancelled_total", "counter", "Requests cancelled by their client.", s.requests_cancelled);
  Add(&out, "requests_failed_total", "counter", "Requests that ended with an error.", s.requests_failed);
  Add(&out, "requests_paused_total", "counter",
      "Requests paused because the ones running together outgrew the KV cache.", s.requests_paused);
  Add(&out, "requests_requeued_total", "counter",
      "Prefilling requests put back in the queue because the ones running together outgrew the KV cache.",
      s.requests_requeued);
  Add(&out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", s.prompt_tokens);
  Add(&out, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from the cache.", s.prompt_tokens_cached);
  Add(&out, "prompt_tokens_prefilled_total", "counter", "Prompt tokens computed at request time.",
      s.prompt_tokens_prefilled);
  Add(&out, "generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  Add(&out, "decode_calls_total", "counter", "Batches decoded.", s.decode_calls);
  Add(&out, "slots_busy", "gauge", "Sequences generating or prefilling now.", s.slots_busy);
  Add(&out, "requests_queued", "gauge", "Requests waiting for a free sequence.", s.queued);
  const auto& c = s.cache;
  out += "# HELP hearth_cache_hits_total Requests that resumed from the cache, by tier.\n";
  out += "# TYPE hearth_cache_hits_total counter\n";
  out += "hearth_cache_hits_total{tier=\"device\"} " + std::to_string(c.hits_device) + "\n";
  out += "hearth_cache_hits_total{tier=\"ram\"} " + std::to_string(c.hits_ram) + "\n";
  out += "hearth_cache_hits_total{tier=\"disk\"} " + std::to_string(c.hits_disk) + "\n";
  Add(&out, "cache_misses_total", "counter", "Requests that found nothing to resume from.", c.misses);
  Add(&out, "cache_snapshots_taken_total", "counter", "States stored in RAM or on disk.", c.snapshots_taken);
  Add(&out, "cache_snapshots_evicted_total", "counter", "States dropped or moved down a tier.", c.snapshots_evicted);
  Add(&out, "cache_snapshots_quarantined_total", "counter", "Corrupt or foreign disk states set aside.",
      c.snapshots_quarantined);
  out += "# HELP hearth_cache_disk_errors_total Disk tier reads and writes that failed (I/O error, full disk).\n";
  out += "# TYPE hearth_cache_disk_errors_total counter\n";
  out += "hearth_cache_disk_errors_total{op=\"read\"} " + std::to_string(c.disk_read_errors) + "\n";
  out += "hearth_cache_disk_errors_total{op=\"write\"} " + std::to_string(c.disk_write_errors) + "\n";
  out += "# HELP hearth_cache_bytes Bytes held by cached states, by tier.\n";
  out += "# TYPE hearth_cache_bytes gauge\n";
  out += "hearth_cache_bytes{tier=\"ram\"} " + std::to_string(c.bytes_ram) + "\n";
  out += "hearth_cache_bytes{tier=\"disk\"} " + std::to_string(c.bytes_disk) + "\n";
  Add(&out, "cache_device_sequences", "gauge", "Idle conversations kept on the device.", c.device_cached);
  Add(&out, "cache_nodes", "gauge", "Nodes of the prefix tree.", static_cast<int64_t>(c.n_nodes));
  Add(&out, "volatile_spans_total", "counter", "Prompts whose reuse a per-request span cut short.", s.volatile_spans);
  Add(&out, "warm_ahead_tasks_total", "counter", "Background prefills of a next turn (skipped ones included).", s.background_tasks);
  Add(&out, "warm_ahead_skipped_total", "counter", "Background prefills skipped: the cache held their prompt, or the request they prepared for came first.",
      s.background_skipped);
  Add(&out, "warm_ahead_tokens_total", "counter", "Tokens prefilled in the background.", s.background_tokens);
  Add(&out, "shadow_tokens_total", "counter", "Tokens of re-rendered replies prefilled while they were generated.",
      s.shadow_tokens);
  Add(&out, "shadows_kept_total", "counter", "Shadow sequences given to the cache when their reply ended.",
      s.shadows_kept);
  Add(&out, "shadows_dropped_total", "counter",
      "Shadow sequences released (reply cut off or diverged, room needed, failure).", s.shadows_dropped);
  return out;
}

}  // namespace hearth::server
