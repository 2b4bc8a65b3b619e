// SequenceLease: a sequence lent by a PrefixCache (Acquire, Lend, Fork), owned as a
// value. Move-only; whoever holds it either gives the sequence to the cache with what it
// holds (Adopt) or lets it go, and on every other path (an early return, an exception, a
// slot destroyed) the destructor gives it back empty (PrefixCache::Release). So a lent
// sequence returns to the cache exactly once, by construction.
//
// Threads: the cache's (the engine loop's); the cache must outlive every lease it lent.
//
// Invariants:
//  1. A lease holds a sequence or nothing (default-constructed, moved from, adopted or
//     released); only a lease that holds one gives it back.
//  2. A sequence is held by at most one lease: the cache lent it once (prefix_cache.h,
//     invariant 1), and moving a lease leaves the source holding nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "cache/prefix_cache.h"

namespace hearth::cache {

class SequenceLease {
 public:
  SequenceLease() = default;
  // Takes over `seq`, which `cache` lent (Acquire, Lend or Fork) and nobody else holds.
  SequenceLease(PrefixCache& cache, int32_t seq) : cache_(&cache), seq_(seq) {}
  SequenceLease(SequenceLease&& other) noexcept
      : cache_(std::exchange(other.cache_, nullptr)), seq_(std::exchange(other.seq_, 0)) {}
  SequenceLease& operator=(SequenceLease&& other) noexcept {
    if (this != &other) {
      Release();
      cache_ = std::exchange(other.cache_, nullptr);
      seq_ = std::exchange(other.seq_, 0);
    }
    return *this;
  }
  SequenceLease(const SequenceLease&) = delete;
  SequenceLease& operator=(const SequenceLease&) = delete;
  ~SequenceLease() { Release(); }

  bool held() const { return cache_ != nullptr; }
  explicit operator bool() const { return held(); }
  // The context sequence id. REQUIRES: held().
  int32_t seq() const { return seq_; }

  // The sequence holds exactly `tokens`: the cache keeps it (PrefixCache::Adopt, where
  // `tail_start` is explained). Holds nothing after. REQUIRES: held().
  void Adopt(const std::string& ns, std::span<const Token> tokens, int32_t tail_start = 0) {
    PrefixCache* cache = std::exchange(cache_, nullptr);
    cache->Adopt(ns, seq_, tokens, tail_start);
  }
  // Gives the sequence back empty; nothing when none is held. Never fails.
  void Release() {
    if (PrefixCache* cache = std::exchange(cache_, nullptr)) cache->Release(seq_);
  }

 private:
  PrefixCache* cache_ = nullptr;  // null: holds nothing
  int32_t seq_ = 0;
};

}  // namespace hearth::cache
