// MemorySharedStore: a SharedStore in this process's memory, for tests of what uses the
// shared tier (two PrefixCaches sharing one stands for two replicas sharing Redis). Put
// stores at once; Drop and Corrupt make the faults a real store has.
//
// Thread safety: every method takes mu_.
#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "cache/shared_store.h"

namespace hearth::cache {

class MemorySharedStore : public SharedStore {
 public:
  void Put(const std::string& ns, std::span<const Token> tokens, StateKind kind, std::vector<uint8_t> bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.puts;
    ++stats_.written;
    stats_.bytes_written += static_cast<int64_t>(bytes.size());
    states_[{ns, kind, std::vector<Token>(tokens.begin(), tokens.end())}] = std::move(bytes);
  }

  SharedLookup Find(const std::string& ns, std::span<const Token> tokens, std::span<const int32_t> depths,
                    StateKind kind) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.lookups;
    SharedLookup out;
    if (down_) {
      ++stats_.misses;
      ++stats_.lookup_errors;
      out.why = "store unavailable: down (a test's fault)";
      return out;
    }
    int32_t best = 0;
    for (int32_t d : depths) {
      if (d <= 0 || d > static_cast<int32_t>(tokens.size())) continue;
      ++out.asked;
      auto it = states_.find({ns, kind, std::vector<Token>(tokens.begin(), tokens.begin() + d)});
      if (it != states_.end() && d > best) {
        best = d;
        out.hit = SharedHit{d, kind, it->second};
      }
    }
    if (out.hit) {
      ++stats_.hits;
      out.bytes = out.hit->bytes.size();
      stats_.bytes_read += static_cast<int64_t>(out.bytes);
    } else {
      ++stats_.misses;
    }
    return out;
  }

  bool Flush(int /*timeout_ms*/) override { return true; }

  SharedStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    SharedStats s = stats_;
    s.connected = true;
    return s;
  }

  // How many states it holds; and the faults: every state forgotten (an eviction, a restart).
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return states_.size();
  }
  void DropAll() {
    std::lock_guard<std::mutex> lock(mu_);
    states_.clear();
  }
  // Down: every Find is a miss that says so (what it holds comes back with it).
  void SetDown(bool down) {
    std::lock_guard<std::mutex> lock(mu_);
    down_ = down;
  }

 private:
  using Key = std::tuple<std::string, StateKind, std::vector<Token>>;
  mutable std::mutex mu_;
  std::map<Key, std::vector<uint8_t>> states_;
  SharedStats stats_;
  bool down_ = false;
};

}  // namespace hearth::cache
