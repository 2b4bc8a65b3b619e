// PrefixCache with CacheConfig::suffix_states: a cached device sequence that shares most of
// its path with another one on the device is evicted as its suffix, and restored over the
// other's prefix (prefix_cache_tiers.cc, EvictDevice).
#include <gtest/gtest.h>

#include "cache/cache_summary.h"
#include "cache/disk_store.h"
#include "cache/prefix_cache_test_util.h"

namespace hearth::cache {
namespace {

class PrefixCacheSuffixTest : public PrefixCacheTest {
 protected:
  // Two conversations on one 100-token system prompt, each cached on the device: the
  // first (system + a + its reply), then the second, which resumed over its KV.
  void TwoConversations() {
    suffix_states_ = true;
    Make(/*recurrent=*/true, 3);
    first_ = Cat(system_, Range(200, 10));
    Turn(first_, reply_, {100});
    ASSERT_EQ(Turn(Cat(system_, Range(300, 20)), Range(600, 5), {100}), 100);
    ASSERT_EQ(cache_->stats().device_cached, 2);
  }
  std::vector<CacheSummary::StateInfo> StatesAt(int32_t position) const {
    std::vector<CacheSummary::StateInfo> at;
    for (const auto& c : SummarizeCache(*cache_, {.max_conversations = 1000}).conversations) {
      for (const auto& st : c.states) {
        if (st.position == position) at.push_back(st);
      }
    }
    return at;
  }
  bool HasKindAt(int32_t position, StateKind kind) const {
    for (const auto& st : StatesAt(position)) {
      if (st.kind == kind) return true;
    }
    return false;
  }

  const Tokens system_ = Range(1, 100);
  const Tokens reply_ = Range(500, 5);
  Tokens first_;
};

TEST_F(PrefixCacheSuffixTest, ASequenceSharingItsPathLeavesItsSuffixAndResumesOverTheOthersPrefix) {
  TwoConversations();
  ASSERT_TRUE(cache_->EvictIdleDevice());  // the least recent: the first conversation
  EXPECT_EQ(cache_->stats().device_cached, 1);
  EXPECT_TRUE(HasKindAt(115, StateKind::kSuffix));
  EXPECT_TRUE(HasKindAt(115, StateKind::kPartial));
  EXPECT_FALSE(HasKindAt(115, StateKind::kFull)) << "the whole history was saved";
  EXPECT_EQ(cache_->CheckInvariants(), "");

  // Its follow-up resumes where it ended, from RAM, writing only the 15 positions past the
  // shared prompt (Turn checks the sequence holds exactly the prompt's tokens).
  const size_t cells_before = store_->restored_cells;
  EXPECT_EQ(Turn(Cat(Cat(first_, reply_), Range(700, 8)), {}), 115);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
  EXPECT_EQ(store_->restored_cells - cells_before, 15u);
}

// Without a device sequence through the shared prompt (another conversation's is there),
// the suffix is of no use: the follow-up resumes from a state it can restore whole, never
// over KV it lacks or another prompt's (Turn checks the tokens).
TEST_F(PrefixCacheSuffixTest, ASuffixWhosePrefixLeftTheDeviceIsNotRestored) {
  TwoConversations();
  ASSERT_TRUE(cache_->EvictIdleDevice());  // the first: a suffix
  ASSERT_TRUE(cache_->EvictIdleDevice());  // the second: nothing shares its path now
  EXPECT_EQ(cache_->stats().device_cached, 0);
  EXPECT_TRUE(HasKindAt(125, StateKind::kFull));
  Turn(Range(5000, 130), Range(9000, 4));
  ASSERT_EQ(cache_->stats().device_cached, 1);
  EXPECT_EQ(Turn(Cat(Cat(first_, reply_), Range(700, 8)), {}), 100);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
}

// Sharing less than half its path, a sequence is saved whole, as without suffix states.
TEST_F(PrefixCacheSuffixTest, ASequenceSharingLessThanHalfItsPathIsSavedWhole) {
  suffix_states_ = true;
  Make(true, 3);
  const Tokens sys = Range(1, 40);
  Turn(Cat(sys, Range(200, 60)), reply_, {40});
  ASSERT_EQ(Turn(Cat(sys, Range(300, 20)), Range(600, 5), {40}), 40);
  ASSERT_TRUE(cache_->EvictIdleDevice());
  EXPECT_TRUE(HasKindAt(105, StateKind::kFull));
  EXPECT_FALSE(HasKindAt(105, StateKind::kSuffix));
}

// A suffix state never goes to disk (its prefix lives on this device only): write-behind
// leaves it out, where a whole state's kind would have been written for it.
TEST_F(PrefixCacheSuffixTest, WriteBehindLeavesASuffixInRam) {
  auto disk = DiskStore::Open(testing::MakeTempDir() + "/cache", 1u << 20, "m", {});
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  suffix_states_ = true;
  Make(true, 3, 1u << 20, disk->get());
  first_ = Cat(system_, Range(200, 10));
  Turn(first_, reply_, {100});
  ASSERT_EQ(Turn(Cat(system_, Range(300, 20)), Range(600, 5), {100}), 100);
  ASSERT_TRUE(cache_->EvictIdleDevice());
  ASSERT_TRUE(HasKindAt(115, StateKind::kSuffix));
  EXPECT_GT(cache_->WriteBehind([] { return false; }), 0);
  for (const auto& st : StatesAt(115)) {
    EXPECT_FALSE(st.tier == Tier::kDisk && st.kind != StateKind::kPartial) << StateKindName(st.kind) << " on disk";
  }
  EXPECT_TRUE(HasKindAt(115, StateKind::kSuffix));
  EXPECT_EQ(cache_->CheckInvariants(), "");
  cache_.reset();
}

}  // namespace
}  // namespace hearth::cache
