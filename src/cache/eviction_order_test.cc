#include "cache/eviction_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace hearth::cache {
namespace {

using Entry = EvictionOrder::Entry;

// The value PrefixCache ranks RAM states by, as a pass over them computes it.
double Value(const Entry& e, int64_t now) {
  return static_cast<double>(e.depth) / static_cast<double>(std::max<int64_t>(e.bytes, 1)) /
         (1.0 + static_cast<double>(now - e.last_used));
}

// The lowest entry by a pass over all of them: newest ones only when no other is left,
// held ones only after those, else the lowest value. Ties: any of the tied may come out.
std::optional<Entry> BruteLowest(const std::map<uint64_t, Entry>& all, int64_t now) {
  std::optional<Entry> best;
  for (const int pass : {0, 1, 2}) {
    for (const auto& [id, e] : all) {
      const int cls = e.held ? 2 : e.newest ? 1 : 0;
      if (cls != pass) continue;
      if (!best || Value(e, now) < Value(*best, now)) best = e;
    }
    if (best) break;
  }
  return best;
}

TEST(EvictionOrderTest, OlderStatesGoBeforeTheNewestAndLowValueFirst) {
  EvictionOrder order;
  order.Insert({1, 100, 10, 1, /*newest=*/true});   // value 10 / 1 at now 1
  order.Insert({2, 100, 10, 1, /*newest=*/false});
  order.Insert({3, 10, 10, 1, /*newest=*/false});   // value 1
  ASSERT_TRUE(order.Lowest(1).has_value());
  EXPECT_EQ(order.Lowest(1)->id, 3u);
  order.Erase(3);
  EXPECT_EQ(order.Lowest(2)->id, 2u) << "a newest state goes only when nothing else is left";
  order.Erase(2);
  EXPECT_EQ(order.Lowest(3)->id, 1u);
  order.Erase(1);
  EXPECT_FALSE(order.Lowest(4).has_value());
  EXPECT_EQ(order.CheckInvariants(), "");
}

// Two states whose order swaps as they age: an old deep state goes before a shallow one
// just used; once both are old, the shallow one (fewer tokens per byte) goes first.
TEST(EvictionOrderTest, TheOrderSwapsAsTheClockAdvances) {
  EvictionOrder order;
  order.Insert({1, 1000, 100, 0, false});  // 10 / (1 + now)
  order.Insert({2, 100, 100, 90, false});  // 1 / (now - 89)
  EXPECT_EQ(order.Lowest(95)->id, 1u);
  EXPECT_EQ(order.Lowest(99)->id, 1u) << "equal values: the lower id first";
  EXPECT_EQ(order.Lowest(100)->id, 2u);
  EXPECT_EQ(order.Lowest(100000)->id, 2u);
  EXPECT_EQ(order.CheckInvariants(), "");
}

TEST(EvictionOrderTest, HeldStatesGoAfterEveryOther) {
  EvictionOrder order;
  order.Insert({1, 10, 10, 1, /*newest=*/false, /*held=*/true});  // the lowest value
  order.Insert({2, 100, 10, 1, /*newest=*/true});
  EXPECT_EQ(order.Lowest(1)->id, 2u) << "a held state goes after a newest one";
  order.SetHeld(1, false);
  EXPECT_EQ(order.Lowest(2)->id, 1u);
  EXPECT_EQ(order.CheckInvariants(), "");
}

// Random entries coming, going, being used and changing newest-ness and holds, with the clock
// moving on: the order's choice is always one a pass over all of them would make.
TEST(EvictionOrderTest, AgreesWithAPassOverAllEntries) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    EvictionOrder order;
    std::map<uint64_t, Entry> all;
    int64_t now = 1;
    uint64_t next_id = 1;
    const int n_ops = 300 + round * 20;
    for (int op = 0; op < n_ops; ++op) {
      now += static_cast<int64_t>(rng() % 4);
      const uint64_t pick = all.empty() ? 0 : std::next(all.begin(), static_cast<long>(rng() % all.size()))->first;
      switch (all.empty() ? 0 : rng() % 7) {
        case 0:
        case 1: {
          // Sizes and depths like partial (small, fixed) and full (proportional) states.
          const int64_t depth = 1 + static_cast<int64_t>(rng() % 2000);
          const int64_t bytes = rng() % 2 ? 300 : 4 * depth + 300;
          Entry e{next_id++, depth, bytes, now - static_cast<int64_t>(rng() % 3), rng() % 3 == 0};
          e.last_used = std::max<int64_t>(e.last_used, 0);
          order.Insert(e);
          all[e.id] = e;
          break;
        }
        case 2:
          order.Erase(pick);
          all.erase(pick);
          break;
        case 3:
          order.SetLastUsed(pick, now);
          all[pick].last_used = now;
          break;
        case 4:
          all[pick].newest = !all[pick].newest;
          order.SetNewest(pick, all[pick].newest);
          break;
        case 5:
          all[pick].held = !all[pick].held;
          order.SetHeld(pick, all[pick].held);
          break;
        default:
          now += static_cast<int64_t>(rng() % 200);
      }
      ++now;
      const std::optional<Entry> got = order.Lowest(now);
      const std::optional<Entry> want = BruteLowest(all, now);
      ASSERT_EQ(got.has_value(), want.has_value());
      if (!got) continue;
      ASSERT_EQ(got->newest, want->newest) << "round " << round << " op " << op;
      ASSERT_EQ(got->held, want->held) << "round " << round << " op " << op;
      ASSERT_DOUBLE_EQ(Value(*got, now), Value(*want, now))
          << "round " << round << " op " << op << ": chose " << got->id << ", a pass chooses " << want->id;
      if (op % 50 == 0) {
        ASSERT_EQ(order.CheckInvariants(), "");
      }
    }
    ASSERT_EQ(order.CheckInvariants(), "");
  }
}

}  // namespace
}  // namespace hearth::cache
