// EngineStats: what the engine loop counts, and StatsBoard, where it publishes them.
//
// Threads: the loop thread updates the board; any thread reads a copy. The board has its
// own lock, held only for the copy or the update, so a reader never waits on the queue or
// the cache summary.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "cache/prefix_cache.h"
#include "cache/shared_store.h"

namespace hearth::server {

struct EngineStats {
  int64_t requests_finished = 0;
  int64_t requests_cancelled = 0;
  int64_t requests_failed = 0;
  int64_t requests_paused = 0;     // paused when requests running together outgrew the KV cells
  int64_t requests_requeued = 0;   // prefills put back in the queue for KV room (progress kept)
  int64_t prompt_tokens = 0;
  int64_t prompt_tokens_cached = 0;
  int64_t prompt_tokens_prefilled = 0;
  int64_t generated_tokens = 0;
  int64_t decode_calls = 0;
  int slots_busy = 0;              // as of the loop's last step
  int queued = 0;                  // read from the wait queue when stats are read
  int64_t volatile_spans = 0;
  int64_t background_tasks = 0;    // warm-ahead tasks done, skipped ones included
  int64_t background_tokens = 0;
  int64_t background_skipped = 0;  // of those, held already or overtaken by their request
  int64_t background_failed = 0;   // warm-ahead tasks that ended with an error (not in requests_failed)
  int64_t shadow_tokens = 0;       // fed to shadow sequences
  int64_t shadow_tokens_with_decode = 0;  // of those, fed in the reply's decode steps
  int64_t shadow_renders = 0;      // replies so far handed to the renderer for a target
  int64_t shadows_kept = 0;        // given to the cache when their reply ended
  int64_t shadows_dropped = 0;     // released: the reply went elsewhere, or room ran out
  cache::CacheStats cache;
  std::optional<cache::SharedStats> shared;  // the shared tier's, with --cache-redis
};

class StatsBoard {
 public:
  // Runs `update(stats)` under the board's lock. Loop thread only.
  template <typename F>
  void Update(F&& update) {
    std::lock_guard<std::mutex> lock(mu_);
    update(stats_);
  }
  // A warm-ahead task skipped (held already, or overtaken) counts as a task too.
  void CountSkippedBackground(int64_t n) {
    Update([n](EngineStats& s) {
      s.background_tasks += n;
      s.background_skipped += n;
    });
  }
  EngineStats Read() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  mutable std::mutex mu_;
  EngineStats stats_;  // guarded by mu_
};

}  // namespace hearth::server
