// Two caches sharing one store stand for two replicas sharing Redis: what one keeps, the
// other resumes from at the same position, with the same state.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/fake_sequence_store.h"
#include "cache/memory_shared_store.h"
#include "cache/prefix_cache.h"

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;

Tokens Range(Token from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

struct Replica {
  explicit Replica(SharedStore* shared) : store(/*recurrent=*/true) {
    CacheConfig c;
    c.needs_partial = true;
    c.sequences = {0, 1};
    cache = std::make_unique<PrefixCache>(c, store, nullptr);
    cache->AttachShared(shared);
  }
  // A request for `prompt` that resumes what it can, prefills the rest and keeps its
  // sequence; returns the tokens it reused.
  int Turn(const Tokens& prompt, const std::vector<int32_t>& boundaries) {
    cache->ImportShared("m", prompt, boundaries, static_cast<int32_t>(prompt.size()) - 1);
    auto lease = cache->Acquire("m", prompt, static_cast<int32_t>(prompt.size()) - 1);
    EXPECT_TRUE(lease.has_value());
    if (!lease) return -1;
    const int n = lease->report.n_reused;
    EXPECT_EQ(store.Get(lease->seq).kv, Tokens(prompt.begin(), prompt.begin() + n)) << "warm must equal cold";
    EXPECT_EQ(store.Get(lease->seq).rec, n);
    store.Extend(lease->seq, Tokens(prompt.begin() + n, prompt.end()));
    cache->Adopt("m", lease->seq, prompt);
    return n;
  }
  FakeSequenceStore store;
  std::unique_ptr<PrefixCache> cache;
};

TEST(PrefixCacheSharedTest, AStateOneReplicaKeptIsResumedByAnotherAtTheSamePosition) {
  MemorySharedStore shared;
  Replica a(&shared), b(&shared);
  const Tokens turn1 = Range(1, 40);
  EXPECT_EQ(a.Turn(turn1, {20, 40}), 0);
  EXPECT_EQ(shared.size(), 0u) << "writes are behind, in idle time";
  EXPECT_EQ(a.cache->ShareBehind([] { return false; }), 1);
  EXPECT_EQ(shared.size(), 1u);
  EXPECT_EQ(a.cache->ShareBehind([] { return false; }), 0) << "a state is given once";

  Tokens turn2 = turn1;
  for (Token t : Range(100, 12)) turn2.push_back(t);
  const SharedImport got = b.cache->ImportShared("m", turn2, std::vector<int32_t>{20, 40, 52}, 51);
  EXPECT_EQ(got.depth, 40);
  EXPECT_EQ(got.asked, 2) << "52 lies past what may be reused";
  EXPECT_TRUE(got.why.empty());
  auto lease = b.cache->Acquire("m", turn2, 51);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->report.n_reused, 40);
  EXPECT_EQ(b.store.Get(lease->seq).kv, turn1) << "warm must equal cold";
  EXPECT_EQ(b.cache->stats().shared_imports, 1);
}

TEST(PrefixCacheSharedTest, TheStoreIsNotAskedWhenTheCacheResumesDeeperAlready) {
  MemorySharedStore shared;
  Replica a(&shared);
  const Tokens turn1 = Range(1, 40);
  a.Turn(turn1, {40});
  a.cache->ShareBehind([] { return false; });
  Tokens turn2 = turn1;
  turn2.push_back(500);
  turn2.push_back(501);
  const SharedImport got = a.cache->ImportShared("m", turn2, std::vector<int32_t>{20, 40}, 41);
  EXPECT_EQ(got.asked, 0);
  EXPECT_EQ(got.depth, 0);
  EXPECT_EQ(shared.stats().lookups, 0);
}

TEST(PrefixCacheSharedTest, ConversationsAlternatingBetweenReplicasPrefillOnlyWhatIsNew) {
  MemorySharedStore shared;
  Replica a(&shared), b(&shared);
  Replica* replicas[] = {&a, &b};
  Tokens prompt = Range(1, 30);
  std::vector<int32_t> boundaries = {30};
  for (int turn = 0; turn < 6; ++turn) {
    Replica& r = *replicas[turn % 2];
    const int reused = r.Turn(prompt, boundaries);
    EXPECT_EQ(reused, turn == 0 ? 0 : boundaries[boundaries.size() - 2]) << "turn " << turn;
    r.cache->ShareBehind([] { return false; });
    for (Token t : Range(1000 * (turn + 1), 15)) prompt.push_back(t);
    boundaries.push_back(static_cast<int32_t>(prompt.size()));
  }
}

TEST(PrefixCacheSharedTest, AStoreThatLostEverythingIsAMissAndTheRequestPrefillsItAll) {
  MemorySharedStore shared;
  Replica a(&shared), b(&shared);
  const Tokens turn1 = Range(1, 40);
  a.Turn(turn1, {40});
  a.cache->ShareBehind([] { return false; });
  shared.DropAll();
  Tokens turn2 = turn1;
  turn2.push_back(7);
  turn2.push_back(8);
  EXPECT_EQ(b.Turn(turn2, {40, 42}), 0);
}

// The client sends back another reply than the one generated (an agent's re-serialized
// tool call): the next prompt leaves the first replica's sequence at the generation
// start, where only a partial state was kept. The other replica resumes there even so.
TEST(PrefixCacheSharedTest, AGenerationStartIsSharedWholeForAReplyTheClientReplaced) {
  MemorySharedStore shared;
  Replica a(&shared), b(&shared);
  const Tokens prompt = Range(1, 40);
  {
    auto lease = a.cache->Acquire("m", prompt, 39);
    ASSERT_TRUE(lease.has_value());
    a.store.Extend(lease->seq, prompt);
    a.cache->SnapshotPartial("m", lease->seq, prompt);  // the generation start
    a.cache->ShareWhenIdle("m", prompt);
    a.store.Extend(lease->seq, Range(500, 4));          // the reply as generated, and a
    Tokens all = prompt;                                 // partial state inside it (as a
    for (Token t : Range(500, 4)) all.push_back(t);      // shadow's cut-off leaves one)
    a.cache->SnapshotPartial("m", lease->seq, all);
    a.store.Extend(lease->seq, Range(504, 6));
    for (Token t : Range(504, 6)) all.push_back(t);
    a.cache->Adopt("m", lease->seq, all, 40);
  }
  EXPECT_EQ(a.cache->ShareBehind([] { return false; }), 2) << "the reply's end and the generation start";
  Tokens next = prompt;
  for (Token t : Range(900, 12)) next.push_back(t);  // another reply, then a tool result
  const SharedImport got = b.cache->ImportShared("m", next, std::vector<int32_t>{40, 52}, 51);
  EXPECT_EQ(got.depth, 40);
  auto lease = b.cache->Acquire("m", next, 51);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->report.n_reused, 40);
  EXPECT_EQ(b.store.Get(lease->seq).kv, prompt) << "warm must equal cold";
  EXPECT_EQ(b.store.Get(lease->seq).rec, 40);
}

}  // namespace
}  // namespace hearth::cache
