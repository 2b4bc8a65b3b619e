// SharedStore: the shared tier. Serialized states that several hearth processes (replicas
// behind one load balancer) write and read, so a conversation resumes on a replica that
// has never seen it. It sits below RAM and disk; the implementation is Redis
// (redis_store.h), tests may use MemorySharedStore (memory_shared_store.h).
//
// Unlike the local tiers there is no tree: a state is stored under a key derived from its
// namespace, kind and a hash of exactly the tokens it holds. A process finds a state by
// hashing its own prompt at the positions where one could be (message boundaries, the
// start of generation) and asking for the deepest first.
//
// Trust: nothing read is used unverified. A value carries the header and checksums of a
// disk file (state_file.h); Find returns a state only when its header names exactly the
// namespace, kind and tokens asked for and its payload checksum holds. A value that is
// missing, evicted (whole or one chunk), partial, corrupt or another state's is a miss,
// never an error; a store that is down or slow is a miss too, with the cause in `why`.
//
// Writes are behind: Put queues and returns at once; the store's own thread writes. The
// queue is bounded in bytes: past it the oldest queued state is dropped (counted). The
// store does the eviction of what was written (Redis: maxmemory with an LRU policy).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/prefix_tree.h"

namespace hearth::cache {

struct SharedHit {
  int32_t depth = 0;           // the state holds exactly tokens[0, depth)
  StateKind kind = StateKind::kFull;
  std::vector<uint8_t> bytes;  // the payload, verified
};

struct SharedLookup {
  std::optional<SharedHit> hit;
  double ms = 0;       // time spent asking (and reading), hit or miss
  size_t bytes = 0;    // bytes read from the store, headers and chunks
  int asked = 0;       // candidate positions asked about
  // Empty on a hit or a plain miss (no state at any candidate); else why a state that may
  // exist was not used: "store unavailable: ...", "chunk 3 of 7 missing (evicted)",
  // "checksum mismatch", "holds another state".
  std::string why;
};

struct SharedStats {
  int64_t puts = 0;           // states queued by Put
  int64_t written = 0;        // states the writer stored whole
  int64_t dropped = 0;        // queued states dropped (queue full, store down, write error)
  int64_t write_errors = 0;   // writes the store refused or that failed on the wire
  int64_t lookups = 0, hits = 0, misses = 0;
  int64_t lookup_errors = 0;  // misses with a cause (SharedLookup::why non-empty)
  int64_t bytes_written = 0, bytes_read = 0;
  size_t queued_bytes = 0;    // waiting for the writer now
  bool connected = false;     // the last exchange with the store succeeded
};

class SharedStore {
 public:
  virtual ~SharedStore() = default;

  // Queues `bytes`, a state of `kind` holding exactly `tokens` in namespace `ns`, to be
  // written behind. Returns at once. A later Put of the same state replaces it.
  virtual void Put(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                   std::vector<uint8_t> bytes) = 0;

  // The deepest d in `depths` (any order; those > tokens.size() or <= 0 are ignored) at
  // which the store holds a state of `kind` holding exactly tokens[0, d) in `ns`, read
  // whole and verified. Asks about every candidate in one round trip where it can.
  virtual SharedLookup Find(const std::string& ns, std::span<const Token> tokens, std::span<const int32_t> depths,
                            StateKind kind) = 0;

  // Waits until every state queued so far is written or dropped, at most `timeout_ms`.
  // True when the queue emptied. For graceful stops and tests.
  virtual bool Flush(int timeout_ms) = 0;

  virtual SharedStats stats() const = 0;
};

}  // namespace hearth::cache
