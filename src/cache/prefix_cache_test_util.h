// What the PrefixCache tests share (prefix_cache_*_test.cc): a fixture over a fake
// sequence store, and token ranges.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cache/disk_store.h"
#include "cache/fake_sequence_store.h"
#include "cache/prefix_cache.h"
#include "testing/test_env.h"

namespace hearth::cache {

using Tokens = std::vector<Token>;

inline Tokens Range(Token from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

inline Tokens Cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  void Make(bool recurrent, int n_seqs, size_t ram = 1u << 20, DiskStore* disk = nullptr, size_t pin_budget = 1u << 20) {
    store_ = std::make_unique<FakeSequenceStore>(recurrent);
    CacheConfig c;
    c.needs_partial = recurrent;
    c.suffix_states = suffix_states_;
    for (int i = 0; i < n_seqs; ++i) c.sequences.push_back(i);
    c.ram_budget_bytes = ram;
    c.pin_budget_bytes = pin_budget;
    c.clock = [this] { return now_; };
    cache_ = std::make_unique<PrefixCache>(c, *store_, disk);
  }

  // A request: acquire, check the restored prefix is exactly the prompt's, "prefill" the
  // rest with partial snapshots at `boundaries`, "generate" `reply`, adopt.
  int Turn(const Tokens& prompt, const Tokens& reply, const std::vector<size_t>& boundaries = {},
           const std::string& ns = "m") {
    auto lease = cache_->Acquire(ns, prompt, static_cast<int32_t>(prompt.size()) - 1);
    EXPECT_TRUE(lease.has_value());
    if (!lease) return -1;
    const int n = lease->report.n_reused;
    const auto& seq = store_->Get(lease->seq);
    // Warm equals cold: the sequence holds exactly the reused prefix.
    EXPECT_EQ(seq.kv, Tokens(prompt.begin(), prompt.begin() + n));
    EXPECT_EQ(store_->Length(lease->seq), n);
    size_t done = static_cast<size_t>(n);
    for (size_t b : boundaries) {
      if (b <= done) continue;
      store_->Extend(lease->seq, Tokens(prompt.begin() + static_cast<long>(done), prompt.begin() + static_cast<long>(b)));
      done = b;
      cache_->SnapshotPartial(ns, lease->seq, Tokens(prompt.begin(), prompt.begin() + static_cast<long>(b)));
    }
    store_->Extend(lease->seq, Tokens(prompt.begin() + static_cast<long>(done), prompt.end()));
    store_->Extend(lease->seq, reply);
    cache_->Adopt(ns, lease->seq, Cat(prompt, reply));
    EXPECT_EQ(cache_->CheckInvariants(), "");
    last_report_ = lease->report;
    return n;
  }

  // Whether any conversation holds a state at `position`.
  bool AnyStateAt(int32_t position) const {
    for (const auto& c : SummarizeCache(*cache_, {.max_conversations = 1000}).conversations) {
      for (const auto& st : c.states) {
        if (st.position == position) return true;
      }
    }
    return false;
  }

  std::unique_ptr<FakeSequenceStore> store_;
  std::unique_ptr<PrefixCache> cache_;
  ResumeReport last_report_;
  std::chrono::steady_clock::time_point now_{};
  bool suffix_states_ = false;  // CacheConfig::suffix_states for the next Make
};

}  // namespace hearth::cache
