// PrefixCache::PlanResume: what a prompt can resume, asked once by admission and by
// shadows starting over.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/fake_sequence_store.h"
#include "cache/prefix_cache.h"

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;
using Positions = std::vector<int32_t>;

Tokens Range(Token from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

class PlanResumeTest : public ::testing::Test {
 protected:
  void Make(bool recurrent, int n_seqs = 2) {
    store_ = std::make_unique<FakeSequenceStore>(recurrent);
    CacheConfig c;
    c.needs_partial = recurrent;
    for (int i = 0; i < n_seqs; ++i) c.sequences.push_back(i);
    cache_ = std::make_unique<PrefixCache>(c, *store_, nullptr);
  }
  // Prefills `tokens` in a fresh sequence with partial snapshots at `at`, then keeps the
  // sequence as a cached device one (adopted) or drops it (released: only the snapshots stay).
  void Prefill(const Tokens& tokens, const Positions& at, bool adopt) {
    auto lease = cache_->Acquire("m", tokens, 0);
    ASSERT_TRUE(lease.has_value());
    size_t done = 0;
    for (int32_t p : at) {
      store_->Extend(lease->seq, Tokens(tokens.begin() + static_cast<long>(done), tokens.begin() + p));
      done = static_cast<size_t>(p);
      cache_->SnapshotPartial("m", lease->seq, Tokens(tokens.begin(), tokens.begin() + p));
    }
    store_->Extend(lease->seq, Tokens(tokens.begin() + static_cast<long>(done), tokens.end()));
    if (adopt) {
      cache_->Adopt("m", lease->seq, tokens);
    } else {
      cache_->Release(lease->seq);
    }
  }

  std::unique_ptr<FakeSequenceStore> store_;
  std::unique_ptr<PrefixCache> cache_;
};

TEST_F(PlanResumeTest, AnEmptyCacheResumesNothingButStillPlansTheLimits) {
  Make(true);
  const Tokens prompt = Range(100, 40);
  const Positions kept = {10, 20, 40};
  const ResumePlan plan = cache_->PlanResume("m", prompt, {.kept_at = kept});
  EXPECT_EQ(plan.max_reuse, 39) << "the last token is computed again";
  EXPECT_EQ(plan.depth, 0);
  EXPECT_EQ(plan.kept_positions, (Positions{20, 10}));
  EXPECT_EQ(plan.shared_candidates.front(), 39);
}

TEST_F(PlanResumeTest, DepthIsTheDeepestStateWithinTheLimit) {
  Make(true);
  const Tokens prompt = Range(100, 40);
  Prefill(prompt, {10, 20}, /*adopt=*/false);  // partial snapshots only (no attention KV)
  Prefill(Range(100, 30), {}, /*adopt=*/true);  // a device sequence through 10 and 20
  const Positions kept = {10, 20, 40};
  ResumePlan plan = cache_->PlanResume("m", prompt, {.kept_at = kept});
  EXPECT_EQ(plan.depth, 30) << "the device sequence ends there";
  EXPECT_EQ(plan.tier, Tier::kDevice);
  EXPECT_EQ(plan.depth, cache_->ResumableDepth("m", std::span(prompt).subspan(0, 39)));
  plan = cache_->PlanResume("m", prompt, {.kept_at = kept, .max_depth = 25});
  EXPECT_EQ(plan.depth, 20) << "the snapshot there, over the device sequence's KV";
  EXPECT_EQ(plan.tier, Tier::kRam) << "the costlier of the two parts";
  plan = cache_->PlanResume("m", prompt, {.kept_at = kept, .max_depth = 15});
  EXPECT_EQ(plan.max_reuse, 15);
  EXPECT_EQ(plan.depth, 10);
  EXPECT_EQ(plan.kept_positions, (Positions{10}));
  EXPECT_EQ(plan.shared_candidates, (Positions{15, 14, 13, 12, 11, 10}));
}

TEST_F(PlanResumeTest, AttentionOnlyModelsResumeInsideAnEdge) {
  Make(false);
  Prefill(Range(100, 30), {}, /*adopt=*/true);
  const Tokens prompt = Range(100, 40);
  const ResumePlan plan = cache_->PlanResume("m", prompt, {});
  EXPECT_EQ(plan.depth, 30);
  const ResumePlan shorter = cache_->PlanResume("m", prompt, {.max_depth = 25});
  EXPECT_EQ(shorter.depth, 25);
}

TEST_F(PlanResumeTest, WithoutTheLastTokenReservedTheWholeSequenceMayResume) {
  Make(true);
  const Tokens prompt = Range(100, 20);
  Prefill(prompt, {}, /*adopt=*/true);
  const Positions kept = {10, 20};
  const ResumePlan request = cache_->PlanResume("m", prompt, {.kept_at = kept});
  EXPECT_EQ(request.max_reuse, 19);
  EXPECT_EQ(request.kept_positions, (Positions{10}));
  const ResumePlan shadow = cache_->PlanResume("m", prompt, {.kept_at = kept, .recompute_last = false});
  EXPECT_EQ(shadow.max_reuse, 20);
  EXPECT_EQ(shadow.depth, 20);
  EXPECT_EQ(shadow.kept_positions, (Positions{20, 10}));
}

TEST_F(PlanResumeTest, PlanningChangesNothing) {
  Make(true);
  const Tokens prompt = Range(100, 30);
  Prefill(prompt, {10}, /*adopt=*/true);
  const CacheStats before = cache_->stats();
  cache_->PlanResume("m", prompt, {});
  const CacheStats after = cache_->stats();
  EXPECT_EQ(after.n_states, before.n_states);
  EXPECT_EQ(after.device_cached, before.device_cached);
  EXPECT_EQ(after.hits_device + after.misses, before.hits_device + before.misses);
  EXPECT_EQ(cache_->CheckInvariants(), "");
}

}  // namespace
}  // namespace hearth::cache
