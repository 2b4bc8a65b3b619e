// RequestLog: the most recent requests the engine finished, with what each got from the
// cache, for GET /v1/cache's timeline. Bounded: past kCapacity the oldest goes.
//
// Threads: Add from the engine loop; Recent from any thread (HTTP handlers). A mutex
// guards the records; each call copies, so no reference outlives it.
//
// A record holds counts, times and the cache's own words on where reuse stopped, never
// token text; its namespace string is kept for filtering (Recent's `visible`), and only
// its hash is meant to be shown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hearth::server {

struct RequestRecord {
  int64_t id = 0;                 // set by Add: 1, 2, ... in the order finished
  int64_t finished_unix_ms = 0;   // wall clock, for the page's time axis
  std::string ns;                 // the cache namespace; show ns_id
  uint64_t ns_id = 0;             // XXH3-64 of ns
  std::string outcome;            // "done", "cancelled", "failed"
  int n_prompt = 0;
  int n_reused = 0;               // resumed from the cache
  int n_matched = 0;              // prompt tokens the cache's tree knew, usable or not
  int n_prefilled = 0;            // computed by this request (less than n_prompt - n_reused when cut off)
  int n_generated = 0;
  std::string tier;               // where the reused part came from; empty when nothing was reused
  double restore_ms = 0;
  double prefill_ms = 0;
  std::optional<double> ttft_ms;  // none when no token came out
  std::string stopped_because;    // why reuse stopped where it did; empty when all of it was reused

  // Of n_prefilled, those the tree knew but held no usable state for (recomputed), and
  // those it had never seen (new).
  int n_recomputed() const;
  int n_new() const { return n_prefilled - n_recomputed(); }
};

class RequestLog {
 public:
  static constexpr size_t kCapacity = 64;

  void Add(RequestRecord record);
  // The records for which visible(ns) is true (all with no function), oldest first.
  std::vector<RequestRecord> Recent(const std::function<bool(const std::string& ns)>& visible = {}) const;

 private:
  mutable std::mutex mu_;
  std::deque<RequestRecord> records_;  // guarded by mu_
  int64_t next_id_ = 1;                // guarded by mu_
};

}  // namespace hearth::server
