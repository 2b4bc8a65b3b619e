// Prometheus text exposition of the engine's counters (GET /metrics), and the prefix
// cache's summary as JSON (GET /v1/cache).
#pragma once

#include <string>

#include "server/engine_loop.h"

namespace hearth::server {

// Every metric is prefixed "hearth_"; counters end in "_total".
std::string FormatPrometheus(const EngineStats& stats);

// {"nodes", "states", "device_sequences_cached", "bytes_ram", "bytes_disk", "hits",
//  "misses", "tokens_reused", "snapshots", "tiers": {tier: {bytes, budget}},
//  "n_conversations", "conversations": [{namespace, tokens, shared_tokens, states: [...]}]}
std::string FormatCacheSummary(const cache::CacheSummary& summary);

}  // namespace hearth::server
