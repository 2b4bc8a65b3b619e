#include "cache/state_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;

// Whether a state lies below `node`, by walking the subtree (not the tree's counts).
bool AnyStateBelow(const PrefixTree::Node* node) {
  for (const auto& [token, child] : node->children) {
    if (!child->states.empty() || AnyStateBelow(child.get())) return true;
  }
  return false;
}

struct Choice {
  uint64_t id = 0;
  double value = 0;
  bool newest = false;
};

// The RAM tier's victim as a pass over the tree chooses it: the least valuable unpinned
// RAM state, sparing each conversation's newest while any other is left.
std::optional<Choice> LinearVictim(const PrefixTree& tree, int64_t now) {
  std::optional<Choice> victim;
  for (const bool spare_newest : {true, false}) {
    tree.ForEachState([&](const PrefixTree::Node* n, const State& s) {
      if (s.tier != Tier::kRam) return;
      const bool newest = !AnyStateBelow(n);
      if (spare_newest && newest) return;
      const double age = static_cast<double>(now - s.last_used);
      const double value = static_cast<double>(n->depth) / static_cast<double>(std::max<size_t>(s.bytes, 1)) / (1.0 + age);
      if (!victim || value < victim->value) victim = Choice{s.id, value, newest};
    });
    if (victim) break;
  }
  return victim;
}

std::vector<uint64_t> LinearDiskStates(const PrefixTree& tree, uint64_t key) {
  std::vector<uint64_t> ids;
  tree.ForEachState([&](const PrefixTree::Node*, const State& s) {
    if (s.tier == Tier::kDisk && s.disk_key == key) ids.push_back(s.id);
  });
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Many random trees (conversations sharing prefixes, two namespaces, states of every tier
// coming and going, used, nodes pinned, removals inside PruneScopes): the index chooses
// the victim a pass over the tree chooses, and finds the disk states a pass finds.
TEST(StateIndexTest, ChoosesWhatAPassOverTheTreeChooses) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE(round);
    PrefixTree tree;
    StateIndex index;
    tree.SetObserver(&index);
    // Conversations: a shared system prompt each, then their own tokens.
    std::vector<Tokens> conversations;
    for (int c = 0; c < 12; ++c) {
      Tokens t;
      for (int i = 0; i < 20; ++i) t.push_back(1000 * (c % 3) + i);
      for (int i = 0; i < 60; ++i) t.push_back(100000 * (c + 1) + i);
      conversations.push_back(t);
    }
    std::vector<uint64_t> ids;
    std::vector<PrefixTree::Node*> pinned;
    for (int op = 0; op < 400; ++op) {
      const int what = ids.empty() ? 0 : static_cast<int>(rng() % 8);
      const size_t pick = ids.empty() ? 0 : rng() % ids.size();
      if (what <= 2) {
        const Tokens& c = conversations[rng() % conversations.size()];
        const auto n = 1 + static_cast<long>(rng() % c.size());
        PrefixTree::Node* node = tree.Insert(rng() % 4 == 0 ? "b" : "a", Tokens(c.begin(), c.begin() + n));
        State s;
        const auto tier = rng() % 5;
        s.tier = tier < 3 ? Tier::kRam : tier == 3 ? Tier::kDisk : Tier::kDevice;
        s.kind = s.tier == Tier::kDevice ? StateKind::kDevice : rng() % 2 ? StateKind::kPartial : StateKind::kFull;
        s.bytes = s.kind == StateKind::kPartial ? 300 : 300 + 4 * static_cast<size_t>(n);
        s.disk_key = rng() % 6;  // keys collide
        ids.push_back(tree.AddState(node, s));
      } else if (what <= 4) {
        // Removals, sometimes several inside one PruneScope (pruning deferred to its end).
        PrefixTree::PruneScope scope(tree);
        const int n = what == 4 ? 3 : 1;
        for (int k = 0; k < n && !ids.empty(); ++k) {
          const size_t at = rng() % ids.size();
          ASSERT_TRUE(tree.RemoveState(ids[at]));
          ids.erase(ids.begin() + static_cast<long>(at));
        }
      } else if (what == 5) {
        tree.Touch(ids[pick]);
      } else if (what == 6) {
        PrefixTree::Node* node = nullptr;
        ASSERT_NE(tree.FindState(ids[pick], &node), nullptr);
        tree.PinNode(node);
        pinned.push_back(node);
      } else if (!pinned.empty()) {
        tree.UnpinNode(pinned.back());
        pinned.pop_back();
      }
      const int64_t now = tree.Tick();
      const std::optional<EvictionOrder::Entry> got = index.NextRamVictim(now);
      const std::optional<Choice> want = LinearVictim(tree, now);
      ASSERT_EQ(got.has_value(), want.has_value()) << "op " << op;
      if (got) {
        ASSERT_EQ(got->newest, want->newest) << "op " << op;
        State* s = nullptr;
        PrefixTree::Node* node = nullptr;
        ASSERT_NE(s = tree.FindState(got->id, &node), nullptr);
        const double value = static_cast<double>(node->depth) / static_cast<double>(std::max<size_t>(s->bytes, 1)) /
                             (1.0 + static_cast<double>(now - s->last_used));
        ASSERT_DOUBLE_EQ(value, want->value) << "op " << op << ": chose " << got->id << ", a pass chooses " << want->id;
      }
      const uint64_t key = rng() % 6;
      std::vector<uint64_t> disk = index.DiskStates(key);
      std::sort(disk.begin(), disk.end());
      ASSERT_EQ(disk, LinearDiskStates(tree, key)) << "op " << op;
      if (op % 40 == 0) {
        ASSERT_EQ(tree.CheckInvariants(), "") << "op " << op;
        ASSERT_EQ(index.CheckAgainst(tree), "") << "op " << op;
      }
    }
    while (!pinned.empty()) {
      tree.UnpinNode(pinned.back());
      pinned.pop_back();
    }
    EXPECT_EQ(tree.CheckInvariants(), "");
    EXPECT_EQ(index.CheckAgainst(tree), "");
    tree.SetObserver(nullptr);
  }
}

// A state the index was not told about (its last use changed behind the tree's back)
// is caught.
TEST(StateIndexTest, CheckAgainstCatchesAStateChangedBehindItsBack) {
  PrefixTree tree;
  StateIndex index;
  tree.SetObserver(&index);
  State s;
  s.bytes = 10;
  const uint64_t id = tree.AddState(tree.Insert("a", Tokens{1, 2, 3}), s);
  EXPECT_EQ(index.CheckAgainst(tree), "");
  tree.FindState(id)->last_used = tree.Tick();
  EXPECT_NE(index.CheckAgainst(tree), "");
  tree.SetObserver(nullptr);
}

}  // namespace
}  // namespace hearth::cache
