#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "cache/cache_summary.h"
#include "cache/disk_store.h"
#include "cache/fake_sequence_store.h"
#include "cache/prefix_cache_test_util.h"
#include "cache/state_file.h"
#include "testing/test_env.h"

namespace hearth::cache {
namespace {

TEST_F(PrefixCacheTest, FollowUpTurnResumesAtTheEndOfThePreviousReply) {
  Make(true, 2);
  const Tokens p1 = Range(100, 50), r1 = Range(500, 10);
  EXPECT_EQ(Turn(p1, r1), 0);
  const Tokens p2 = Cat(Cat(p1, r1), Range(700, 20));
  EXPECT_EQ(Turn(p2, Range(900, 5)), 60) << "the device sequence is handed over as it is";
  EXPECT_EQ(store_->n_copies, 0);
  EXPECT_EQ(last_report_.tier, Tier::kDevice);
}

// Hits and misses count requests' own lookups, not the engine's internal ones.
TEST_F(PrefixCacheTest, OnlyRequestLookupsCountAsHitsOrMisses) {
  Make(true, 3);
  const Tokens p1 = Range(100, 50), r1 = Range(500, 10);
  Turn(p1, r1);
  EXPECT_EQ(cache_->stats().misses, 1);
  const Tokens p2 = Cat(Cat(p1, r1), Range(700, 20));
  auto internal = cache_->Acquire("m", p2, static_cast<int32_t>(p2.size()), PrefixCache::Lookup::kInternal);
  ASSERT_TRUE(internal.has_value());
  EXPECT_EQ(internal->report.n_reused, 60);
  auto unknown = cache_->Acquire("m", Range(3000, 10), 9, PrefixCache::Lookup::kInternal);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->report.n_reused, 0);
  EXPECT_EQ(cache_->stats().hits_device + cache_->stats().hits_ram + cache_->stats().hits_disk, 0);
  EXPECT_EQ(cache_->stats().misses, 1);
  EXPECT_EQ(cache_->stats().tokens_reused, 0);
  cache_->Adopt("m", internal->seq, Cat(p1, r1));
  cache_->Release(unknown->seq);
  EXPECT_EQ(Turn(p2, Range(900, 5)), 60);
  EXPECT_EQ(cache_->stats().hits_device, 1);
  EXPECT_EQ(cache_->stats().tokens_reused, 60);
}

TEST_F(PrefixCacheTest, DivergenceResumesFromTheBoundarySnapshotBeforeIt) {
  Make(true, 3);
  const Tokens p1 = Range(100, 50);
  Turn(p1, Range(500, 10), {20, 40});
  // The next prompt re-renders the history from position 45 on (the template trap).
  const Tokens p2 = Cat(Tokens(p1.begin(), p1.begin() + 45), Range(800, 30));
  EXPECT_EQ(Turn(p2, Range(900, 5)), 40) << "attention from the old sequence, recurrent state from the snapshot at 40";
  EXPECT_EQ(store_->n_copies, 1);
  EXPECT_NE(last_report_.stopped_because.find("45"), std::string::npos) << last_report_.stopped_because;
}

// Shadow prefill: a fork of a lent sequence, and starting it over at a boundary.
TEST_F(PrefixCacheTest, ForkCopiesALentSequenceAndReseedRestartsItAtASnapshot) {
  Make(true, 3);
  const Tokens p = Range(100, 50);
  auto lease = cache_->Acquire("m", p, 49);
  ASSERT_TRUE(lease.has_value());
  store_->Extend(lease->seq, Tokens(p.begin(), p.begin() + 40));
  cache_->SnapshotPartial("m", lease->seq, Tokens(p.begin(), p.begin() + 40));
  store_->Extend(lease->seq, Tokens(p.begin() + 40, p.end()));
  auto fork = cache_->Fork(lease->seq);
  ASSERT_TRUE(fork.has_value());
  EXPECT_NE(*fork, lease->seq);
  EXPECT_EQ(store_->Get(*fork).kv, p);
  store_->Extend(*fork, Range(900, 7));  // the shadow runs ahead on its own path

  EXPECT_TRUE(cache_->Reseed("m", Tokens(p.begin(), p.begin() + 40), *fork, lease->seq).ok());
  EXPECT_EQ(store_->Get(*fork).kv, Tokens(p.begin(), p.begin() + 40));
  EXPECT_EQ(store_->Get(*fork).rec, 40) << "recurrent state from the snapshot, not the source's end";
  EXPECT_EQ(store_->Get(lease->seq).kv, p) << "the source is untouched";

  const Status none = cache_->Reseed("m", Tokens(p.begin(), p.begin() + 30), *fork, lease->seq);
  EXPECT_EQ(none.code(), StatusCode::kNotFound) << none.ToString();
  EXPECT_TRUE(store_->Get(*fork).kv.empty());

  // An empty lent sequence reseeds the same way.
  auto lent = cache_->Lend();
  ASSERT_TRUE(lent.has_value());
  EXPECT_NE(*lent, lease->seq);
  EXPECT_NE(*lent, *fork);
  EXPECT_TRUE(store_->Get(*lent).kv.empty());
  EXPECT_TRUE(cache_->Reseed("m", Tokens(p.begin(), p.begin() + 40), *lent, lease->seq).ok());
  EXPECT_EQ(store_->Get(*lent).kv, Tokens(p.begin(), p.begin() + 40));
  EXPECT_EQ(store_->Get(*lent).rec, 40);
  EXPECT_FALSE(cache_->Lend().has_value()) << "three sequences, all lent";
  cache_->Release(*lent);
  cache_->Release(*fork);
  cache_->Release(lease->seq);
  EXPECT_EQ(cache_->CheckInvariants(), "");
}

TEST_F(PrefixCacheTest, WithoutASnapshotBeforeTheDivergenceNothingIsReused) {
  Make(true, 3);
  const Tokens p1 = Range(100, 50);
  Turn(p1, Range(500, 10));
  const Tokens p2 = Cat(Tokens(p1.begin(), p1.begin() + 45), Range(800, 30));
  EXPECT_EQ(Turn(p2, {}), 0);
  EXPECT_FALSE(last_report_.stopped_because.empty());
}

TEST_F(PrefixCacheTest, AttentionOnlyModelsResumeAnywhereOnTheMatchingPath) {
  Make(false, 3);
  const Tokens p1 = Range(100, 50);
  Turn(p1, Range(500, 10));
  const Tokens p2 = Cat(Tokens(p1.begin(), p1.begin() + 45), Range(800, 30));
  EXPECT_EQ(Turn(p2, {}), 45);
}

TEST_F(PrefixCacheTest, SharedSystemPromptIsReusedByAnotherConversation) {
  Make(true, 3);
  const Tokens system = Range(1, 30);
  Turn(Cat(system, Range(100, 20)), Range(500, 5), {30});
  EXPECT_EQ(Turn(Cat(system, Range(200, 20)), Range(600, 5), {30}), 30);
}

TEST_F(PrefixCacheTest, EvictedDeviceSequencesMoveToRamAndResumeFromThere) {
  Make(true, 2);
  std::vector<Tokens> convs = {Range(1000, 40), Range(2000, 40), Range(3000, 40)};
  for (const auto& c : convs) Turn(c, Range(9000, 4));  // the third evicts the first
  EXPECT_EQ(cache_->stats().device_cached, 2);
  EXPECT_GT(cache_->stats().bytes_ram, 0u);
  const Tokens follow = Cat(Cat(convs[0], Range(9000, 4)), Range(7000, 10));
  EXPECT_EQ(Turn(follow, {}), 44);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
}

// In idle time a sequence is freed ahead of the next request: the least recently used
// cached conversation moves to RAM, so the next new prompt moves nothing; the most recent
// conversation always stays on the device.
TEST_F(PrefixCacheTest, SpareSequenceComesFromTheLeastRecentlyUsed) {
  Make(true, 3);
  std::vector<Tokens> convs = {Range(1000, 40), Range(2000, 40), Range(3000, 40)};
  for (const auto& c : convs) Turn(c, Range(9000, 4));
  ASSERT_EQ(cache_->stats().device_cached, 3);
  ASSERT_EQ(cache_->stats().bytes_ram, 0u);
  EXPECT_TRUE(cache_->SpareASequence());
  EXPECT_EQ(cache_->stats().device_cached, 2);
  const size_t ram = cache_->stats().bytes_ram;
  EXPECT_GT(ram, 0u);
  EXPECT_FALSE(cache_->SpareASequence()) << "one sequence is free already";
  Turn(Range(4000, 40), Range(9000, 4));
  EXPECT_EQ(cache_->stats().bytes_ram, ram) << "the new prompt had to move a state to RAM";
  EXPECT_EQ(Turn(Cat(Cat(convs[2], Range(9000, 4)), Range(7000, 10)), {}), 44);
  EXPECT_EQ(last_report_.tier, Tier::kDevice);
  EXPECT_EQ(Turn(Cat(Cat(convs[0], Range(9000, 4)), Range(7000, 10)), {}), 44);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
}

TEST_F(PrefixCacheTest, TheOnlyCachedSequenceIsNotSpared) {
  Make(true, 1);
  Turn(Range(1000, 40), Range(9000, 4));
  EXPECT_FALSE(cache_->SpareASequence());
  EXPECT_EQ(cache_->stats().device_cached, 1);
  EXPECT_EQ(Turn(Cat(Cat(Range(1000, 40), Range(9000, 4)), Range(7000, 10)), {}), 44);
  EXPECT_EQ(last_report_.tier, Tier::kDevice);
}

// A reply as generated and its shadow (forked at the generation start, holding the reply
// as the template re-renders it, which the next request carries). When the reply's
// sequence is evicted while a sequence on the device still holds its prompt up to where
// the reply starts (the shadow, cached or taken over by the next request), it is
// dropped, not serialized, before any older state; the snapshot on its own tail goes
// with it. A sequence that is not a request's, or whose prompt the shadow left before the
// reply (a template re-rendering earlier turns: the prompt is still what the next request
// may carry), moves to RAM as before.
TEST_F(PrefixCacheTest, ReplyTakenOverByItsShadowIsDroppedNotSaved) {
  enum Variant { kShadowCached, kShadowTakenOver, kNotARequest, kShadowPartsInThePrompt };
  for (Variant v : {kShadowCached, kShadowTakenOver, kNotARequest, kShadowPartsInThePrompt}) {
    SCOPED_TRACE(v);
    Make(true, 4);
    Turn(Range(5000, 40), Range(9000, 4));  // an older conversation, least recently used
    const Tokens history = Range(1, 96);
    const Tokens prompt = Cat(history, Range(100, 4));
    const Tokens generated = Range(500, 20);
    const Tokens next = Cat(Cat(history, Range(300, 16)), Range(700, 10));
    auto r = cache_->Acquire("m", prompt, 99);
    ASSERT_TRUE(r.has_value());
    store_->Extend(r->seq, history);
    cache_->SnapshotPartial("m", r->seq, history);
    auto shadow = cache_->Fork(r->seq);
    ASSERT_TRUE(shadow.has_value());
    store_->Extend(r->seq, Range(100, 4));
    cache_->SnapshotPartial("m", r->seq, prompt);
    store_->Extend(r->seq, generated);
    store_->Extend(*shadow, Range(300, 16));
    cache_->Adopt("m", *shadow, Tokens(next.begin(), next.end() - 10));
    const size_t reply_start = v == kNotARequest ? 0 : v == kShadowPartsInThePrompt ? prompt.size() : history.size();
    cache_->Adopt("m", r->seq, Cat(prompt, generated), static_cast<int32_t>(reply_start));
    std::optional<PrefixCache::Lease> taken;
    if (v == kShadowTakenOver) {
      taken = cache_->Acquire("m", next, static_cast<int32_t>(next.size()) - 1);
      ASSERT_TRUE(taken.has_value());
      ASSERT_EQ(taken->seq, *shadow);
    }
    const int saves = store_->n_saves;
    const int64_t evicted = cache_->stats().snapshots_evicted;
    Turn(Range(2000, 40), Range(9000, 4));  // the last free sequence
    Turn(Range(3000, 40), Range(9000, 4));  // evicts one
    EXPECT_EQ(cache_->CheckInvariants(), "");
    if (v == kNotARequest || v == kShadowPartsInThePrompt) {
      EXPECT_EQ(store_->n_saves, saves + 1);
      EXPECT_EQ(Turn(Cat(Cat(prompt, generated), Range(800, 4)), {}), 120) << "the reply's sequence was lost";
    } else {
      EXPECT_EQ(store_->n_saves, saves) << "the superseded reply was serialized";
      // The reply's state and the snapshot on its tail, which would outlive its KV.
      EXPECT_EQ(cache_->stats().snapshots_evicted, evicted + 2);
      EXPECT_EQ(Turn(Cat(Cat(Range(5000, 40), Range(9000, 4)), Range(7000, 3)), {}), 44)
          << "an older conversation was evicted first";
      EXPECT_EQ(last_report_.tier, Tier::kDevice);
    }
    if (taken) {
      store_->Extend(taken->seq, Tokens(next.end() - 10, next.end()));
      cache_->Adopt("m", taken->seq, next);
    }
    EXPECT_EQ(Turn(Cat(next, Range(900, 4)), {}), static_cast<int>(next.size()) - (v == kShadowTakenOver ? 0 : 10));
    EXPECT_EQ(cache_->CheckInvariants(), "");
  }
}

// Of two serialized states that carry the attention part through the resume depth, the
// smaller is restored: restoring one far deeper costs its whole length in time and in
// free KV cells (and failed for lack of cells in the grow benchmark).
TEST_F(PrefixCacheTest, TheSmallestSerializedSourceIsRestored) {
  Make(true, 1);
  const Tokens shared = Range(1, 20);
  Turn(Cat(shared, Range(100, 78)), Range(500, 2), {20});  // 100 tokens
  Turn(Cat(shared, Range(200, 10)), Range(600, 2));        // 32; the first moves to RAM
  Turn(Range(5000, 10), Range(9000, 2));                   // the second moves to RAM
  ASSERT_EQ(cache_->stats().device_cached, 1);
  EXPECT_EQ(Turn(Cat(shared, Range(900, 5)), {}), 20);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
  EXPECT_LT(last_report_.restored_bytes, 4u * 100) << "the 100-token state was restored to resume at 20";
  EXPECT_GT(last_report_.restored_bytes, 4u * 32);
}

TEST_F(PrefixCacheTest, RamBudgetHoldsUnderPressure) {
  store_ = nullptr;
  Make(true, 1, /*ram=*/2000);
  store_->padding = 300;
  for (int i = 0; i < 20; ++i) {
    Turn(Range(1000 * (i + 1), 40), Range(50, 3), {10, 20, 30});
    ASSERT_LE(cache_->stats().bytes_ram, 2000u);
  }
  EXPECT_GT(cache_->stats().snapshots_evicted, 0);
}

// Under RAM pressure, boundary snapshots go before the newest state of any conversation:
// the oldest conversation can still resume its whole history.
TEST_F(PrefixCacheTest, EachConversationsNewestStateOutlivesBoundarySnapshots) {
  store_ = nullptr;
  Make(true, 1, /*ram=*/2400);
  store_->padding = 300;  // partial states 305 bytes, full ones (43 tokens) 477
  std::vector<Tokens> histories;
  for (int i = 0; i < 5; ++i) {
    const Tokens p = Range(1000 * (i + 1), 40);
    Turn(p, Range(50, 3), {10, 20, 30});
    histories.push_back(Cat(p, Range(50, 3)));
  }
  EXPECT_GT(cache_->stats().snapshots_evicted, 0);
  EXPECT_EQ(Turn(Cat(histories[0], Range(9000, 5)), {}), 43);
  EXPECT_EQ(last_report_.tier, Tier::kRam);
}

// A live conversation's newest state is held (the engine holds each request's newest
// state for --cache-pin-minutes): under pressure an idle conversation's goes instead,
// although the live one is older and, unheld, would go first.
TEST_F(PrefixCacheTest, AHeldLiveConversationsNewestStateSurvivesPressureAnIdleOneDoesNot) {
  store_ = nullptr;
  Make(true, 1, /*ram=*/2400);
  store_->padding = 300;  // partial states 305 bytes, full ones (43 tokens) 477
  const HoldSpec live{.duration = std::chrono::minutes(10), .newest = true};
  const Tokens a = Cat(Range(1000, 40), Range(50, 3)), b = Cat(Range(2000, 40), Range(50, 3));
  Turn(Range(1000, 40), Range(50, 3), {10, 20, 30});
  ASSERT_EQ(cache_->Hold("m", a, live), 43);
  Turn(Range(2000, 40), Range(50, 3), {10, 20, 30});  // idle from here on
  for (int i = 0; i < 6; ++i) Turn(Range(3000 + 1000 * i, 40), Range(50, 3), {10, 20, 30});
  EXPECT_EQ(cache_->stats().n_holds, 1u);
  EXPECT_LT(Turn(Cat(b, Range(9000, 5)), {}), 43) << "the idle conversation recomputes";
  EXPECT_EQ(Turn(Cat(a, Range(9000, 5)), {}), 43) << "the live one resumes its whole history";
  EXPECT_EQ(last_report_.tier, Tier::kRam);
}

// Held bytes stay within the pin budget: the least recently held conversation loses its
// hold first, then goes like any other.
TEST_F(PrefixCacheTest, ThePinBudgetHoldsAndTheLeastRecentlyHeldLosesItsHoldFirst) {
  store_ = nullptr;
  Make(true, 1, /*ram=*/2400, nullptr, /*pin_budget=*/1000);  // two full states (477 bytes)
  store_->padding = 300;
  const HoldSpec live{.duration = std::chrono::minutes(10), .newest = true};
  std::vector<Tokens> held;
  for (int i = 0; i < 3; ++i) {
    const Tokens p = Range(1000 * (i + 1), 40);
    Turn(p, Range(50, 3), {10, 20, 30});
    held.push_back(Cat(p, Range(50, 3)));
    cache_->Hold("m", held.back(), live);
  }
  for (int i = 0; i < 6; ++i) {
    Turn(Range(10000 + 1000 * i, 40), Range(50, 3), {10, 20, 30});
    ASSERT_LE(cache_->stats().bytes_held, 1000u);
  }
  EXPECT_GE(cache_->stats().holds_released, 1);
  EXPECT_LT(Turn(Cat(held[0], Range(9000, 5)), {}), 43) << "the least recently held lost its hold";
  EXPECT_EQ(Turn(Cat(held[2], Range(9000, 5)), {}), 43);
  EXPECT_EQ(Turn(Cat(held[1], Range(9000, 5)), {}), 43);
}

// A client's cache breakpoint (Anthropic cache_control) holds the state at its position
// for its ttl: the boundary snapshot outlives unheld ones, which go first otherwise (they
// save the fewest tokens per byte), and goes like them once the ttl has passed.
TEST_F(PrefixCacheTest, ABreakpointsStateOutlivesUnheldOnesForItsTtl) {
  store_ = nullptr;
  Make(true, 1, /*ram=*/2400);
  store_->padding = 300;
  // Its snapshots sit where no other conversation's do (the others' at 10, 20, 30).
  const Tokens x = Range(1000, 40);
  Turn(x, Range(50, 3), {12, 21, 31});
  ASSERT_EQ(cache_->Hold("m", Tokens(x.begin(), x.begin() + 14), {.duration = std::chrono::minutes(5)}), 12)
      << "a breakpoint between snapshots holds the one before it";
  for (int i = 0; i < 4; ++i) Turn(Range(3000 + 1000 * i, 40), Range(50, 3), {10, 20, 30});
  EXPECT_TRUE(AnyStateAt(12)) << "held for 5 minutes";
  EXPECT_FALSE(AnyStateAt(21)) << "an unheld snapshot on the same path went";
  EXPECT_FALSE(AnyStateAt(31));
  now_ += std::chrono::minutes(6);
  for (int i = 0; i < 4; ++i) Turn(Range(8000 + 1000 * i, 40), Range(50, 3), {10, 20, 30});
  EXPECT_EQ(cache_->stats().n_holds, 0u);
  EXPECT_FALSE(AnyStateAt(12)) << "the ttl has passed";
}

TEST_F(PrefixCacheTest, NamespacesDoNotShare) {
  Make(true, 3);
  const Tokens p = Range(100, 40);
  Turn(p, Range(500, 4), {}, "model|salt-a");
  EXPECT_EQ(Turn(Cat(Cat(p, Range(500, 4)), Range(1, 5)), {}, {}, "model|salt-b"), 0);
}

// A whole state restored from RAM needs KV cells; an idle cached sequence holding them
// moves to RAM first, rather than the restore failing and the prompt being recomputed.
TEST_F(PrefixCacheTest, RoomIsMadeBeforeARestore) {
  Make(true, 2);
  store_->cells = 50;  // one conversation of 30 fits, two do not
  const Tokens a = Range(100, 30), b = Range(500, 30);
  Turn(a, {});
  Turn(b, {});
  ASSERT_TRUE(cache_->EvictIdleDevice());  // a (least recently used) moves to RAM
  EXPECT_EQ(Turn(Cat(a, Range(50, 4)), {}), 30) << last_report_.stopped_because;
  EXPECT_EQ(last_report_.tier, Tier::kRam);
  EXPECT_FALSE(last_report_.no_room);
  // b made room and kept its state: its follow-up resumes too.
  EXPECT_EQ(Turn(Cat(b, Range(60, 4)), {}), 30) << last_report_.stopped_because;
}

// When only lent sequences hold the cells, the restore fails, says so, and keeps the
// state for later.
TEST_F(PrefixCacheTest, ARestoreWithoutRoomSaysSoAndKeepsTheState) {
  Make(true, 2);
  store_->cells = 50;
  const Tokens a = Range(100, 30);
  Turn(a, {});
  ASSERT_TRUE(cache_->EvictIdleDevice());
  auto busy = cache_->Acquire("m", Range(900, 40), 39);  // a request holding 40 cells
  ASSERT_TRUE(busy.has_value());
  store_->Extend(busy->seq, Range(900, 40));
  const Tokens next = Cat(a, Range(50, 4));
  auto lease = cache_->Acquire("m", next, static_cast<int32_t>(next.size()) - 1);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->report.n_reused, 0);
  EXPECT_TRUE(lease->report.no_room);
  EXPECT_NE(lease->report.stopped_because.find("no free KV cells"), std::string::npos) << lease->report.stopped_because;
  cache_->Release(lease->seq);
  cache_->Release(busy->seq);
  EXPECT_EQ(Turn(next, {}), 30) << "the state that had no room was kept";
}

TEST_F(PrefixCacheTest, SummaryListsConversationsWithTheirStatesNewestFirst) {
  Make(true, 2);
  const Tokens system = Range(100, 10);
  Turn(Cat(system, Range(200, 10)), Range(700, 3), {10});
  Turn(Cat(system, Range(300, 12)), Range(800, 2), {10});
  const CacheSummary all = SummarizeCache(*cache_, {.max_conversations = 10});
  ASSERT_EQ(all.n_conversations, 2u);
  ASSERT_EQ(all.conversations.size(), 2u);
  const auto& newest = all.conversations[0];
  EXPECT_EQ(newest.n_tokens, 24);
  EXPECT_EQ(newest.n_shared, 10);
  ASSERT_EQ(newest.states.size(), 2u) << "the shared snapshot at 10 and its device sequence";
  EXPECT_EQ(newest.states[0].position, 10);
  EXPECT_EQ(newest.states[0].kind, StateKind::kPartial);
  EXPECT_EQ(newest.states[1].position, 24);
  EXPECT_EQ(newest.states[1].tier, Tier::kDevice);
  EXPECT_EQ(all.conversations[1].n_tokens, 23);
  EXPECT_EQ(newest.ns_id, all.conversations[1].ns_id);
  const CacheSummary one = SummarizeCache(*cache_, {.max_conversations = 1});
  EXPECT_EQ(one.n_conversations, 2u);
  ASSERT_EQ(one.conversations.size(), 1u);
  EXPECT_EQ(one.conversations[0].n_tokens, 24);
}

TEST_F(PrefixCacheTest, AConversationsNamespaceIsFreedWithItsLastState) {
  Make(true, 1, /*ram=*/1);  // nothing fits in RAM, no disk: evicted states are gone
  for (int salt = 0; salt < 5; ++salt) Turn(Range(100, 10), {}, {}, "m|salt" + std::to_string(salt));
  EXPECT_EQ(SummarizeCache(*cache_, {.max_conversations = 10}).n_conversations, 1u) << "only the device sequence is left";
  EXPECT_EQ(cache_->CheckInvariants(), "") << "no empty root per salt stays behind";
}

}  // namespace
}  // namespace hearth::cache
