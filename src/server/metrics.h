// Prometheus text exposition of the engine's counters (GET /metrics). The prefix cache's
// summary (GET /v1/cache) is cache_view.h.
#pragma once

#include <string>

#include "server/engine_loop.h"

namespace hearth::server {

// Every metric is prefixed "hearth_"; counters end in "_total".
std::string FormatPrometheus(const EngineStats& stats);

}  // namespace hearth::server
