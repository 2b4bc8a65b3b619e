#include "cache/prefix_tree.h"

#include <gtest/gtest.h>

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;

State Partial() {
  State s;
  s.kind = StateKind::kPartial;
  s.bytes = 10;
  return s;
}

TEST(PrefixTreeTest, InsertSplitsEdgesAndMatchFindsTheDeepestPrefix) {
  PrefixTree t;
  auto* a = t.Insert("ns", Tokens{1, 2, 3, 4, 5});
  t.AddState(a, Partial());
  auto* b = t.Insert("ns", Tokens{1, 2, 3, 9});
  t.AddState(b, Partial());
  EXPECT_EQ(t.CheckInvariants(), "") << "the fork at depth 3 is a node with two children";
  EXPECT_EQ(a->depth, 5);
  EXPECT_EQ(b->parent->depth, 3);

  auto m = t.MatchPrefix("ns", Tokens{1, 2, 3, 4, 7});
  EXPECT_EQ(m.n_matched, 4u);
  ASSERT_NE(m.below, nullptr);
  EXPECT_EQ(m.below, a) << "the match ends inside a's edge";
  EXPECT_EQ(m.path.back()->depth, 3);

  auto full = t.MatchPrefix("ns", Tokens{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(full.n_matched, 5u);
  EXPECT_EQ(full.path.back(), a);
  EXPECT_EQ(t.PathTokens(a), (Tokens{1, 2, 3, 4, 5}));
  EXPECT_EQ(t.NamespaceOf(a), "ns");
}

TEST(PrefixTreeTest, NamespacesNeverShareNodes) {
  PrefixTree t;
  t.AddState(t.Insert("model-a", Tokens{1, 2, 3}), Partial());
  EXPECT_EQ(t.MatchPrefix("model-b", Tokens{1, 2, 3}).n_matched, 0u);
  EXPECT_EQ(t.MatchPrefix("model-a", Tokens{1, 2, 3}).n_matched, 3u);
}

TEST(PrefixTreeTest, RemovingStatesPrunesAndMergesNodes) {
  PrefixTree t;
  const uint64_t x = t.AddState(t.Insert("ns", Tokens{1, 2, 3, 4}), Partial());
  const uint64_t y = t.AddState(t.Insert("ns", Tokens{1, 2, 8}), Partial());
  const uint64_t z = t.AddState(t.Insert("ns", Tokens{1, 2}), Partial());
  EXPECT_EQ(t.n_nodes(), 3u);
  ASSERT_TRUE(t.RemoveState(z));
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(t.n_nodes(), 3u) << "depth 2 stays as a fork";
  ASSERT_TRUE(t.RemoveState(y));
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(t.n_nodes(), 1u) << "the fork merged into the remaining branch";
  EXPECT_EQ(t.MatchPrefix("ns", Tokens{1, 2, 3, 4}).n_matched, 4u);
  ASSERT_TRUE(t.RemoveState(x));
  EXPECT_EQ(t.n_nodes(), 0u);
  EXPECT_FALSE(t.RemoveState(x));
  EXPECT_EQ(t.CheckInvariants(), "");
}

TEST(PrefixTreeTest, PinnedNodesSurviveWithoutStates) {
  PrefixTree t;
  auto* n = t.Insert("ns", Tokens{5, 6});
  t.PinNode(n);
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(t.n_nodes(), 1u);
  t.UnpinNode(n);
  EXPECT_EQ(t.n_nodes(), 0u);
}

TEST(PrefixTreeTest, ManyRandomSequencesKeepInvariants) {
  PrefixTree t;
  std::vector<uint64_t> ids;
  uint32_t r = 12345;
  auto next = [&] { return r = r * 1103515245u + 12345u; };
  for (int i = 0; i < 300; ++i) {
    Tokens seq;
    const int len = 1 + static_cast<int>(next() % 12);
    for (int j = 0; j < len; ++j) seq.push_back(static_cast<Token>(next() % 3));
    ids.push_back(t.AddState(t.Insert("ns", seq), Partial()));
    if (next() % 3 == 0 && !ids.empty()) {
      t.RemoveState(ids[next() % ids.size()]);
    }
    ASSERT_EQ(t.CheckInvariants(), "") << "after step " << i;
  }
}

TEST(PrefixTreeTest, ARootLeftEmptyIsFreed) {
  PrefixTree t;
  std::vector<uint64_t> ids;
  for (int salt = 0; salt < 100; ++salt) ids.push_back(t.AddState(t.Insert("ns" + std::to_string(salt), Tokens{1, 2}), Partial()));
  EXPECT_EQ(t.n_roots(), 100u);
  for (uint64_t id : ids) ASSERT_TRUE(t.RemoveState(id));
  EXPECT_EQ(t.n_roots(), 0u);
  EXPECT_EQ(t.n_nodes(), 0u);
  EXPECT_EQ(t.CheckInvariants(), "");
}

TEST(PrefixTreeTest, InsideAPruneScopeNoNodeIsFreed) {
  PrefixTree t;
  auto* leaf = t.Insert("ns", Tokens{1, 2, 3, 4});
  const uint64_t a = t.AddState(leaf, Partial());
  const uint64_t b = t.AddState(t.Insert("ns", Tokens{1, 2, 9}), Partial());
  PrefixTree::Node* fork = leaf->parent;
  ASSERT_EQ(fork->depth, 2);
  {
    PrefixTree::PruneScope scope(t);
    ASSERT_TRUE(t.RemoveState(b));  // would merge the fork into the leaf's edge
    EXPECT_EQ(fork->depth, 2) << "still alive";
    EXPECT_EQ(fork->children.size(), 2u) << "the emptied leaf stays too";
    {
      PrefixTree::PruneScope inner(t);
      ASSERT_TRUE(t.RemoveState(a));
    }
    EXPECT_EQ(t.n_nodes(), 3u) << "the inner scope's end prunes nothing";
  }
  EXPECT_EQ(t.n_nodes(), 0u);
  EXPECT_EQ(t.n_roots(), 0u);
  EXPECT_EQ(t.CheckInvariants(), "");
}

// Each node counts the states below it (what makes HasStateBelow O(1)), through edge
// splits, merges and deferred pruning.
TEST(PrefixTreeTest, NodesCountTheStatesBelowThem) {
  PrefixTree t;
  auto* deep = t.Insert("ns", Tokens{1, 2, 3, 4, 5});
  const uint64_t a = t.AddState(deep, Partial());
  auto* mid = t.Insert("ns", Tokens{1, 2, 3});  // splits deep's edge
  const uint64_t b = t.AddState(mid, Partial());
  EXPECT_EQ(mid->n_states_below, 1u) << "the split node takes over the count of what lies below it";
  EXPECT_TRUE(PrefixTree::HasStateBelow(mid));
  EXPECT_FALSE(PrefixTree::HasStateBelow(deep));
  t.AddState(t.Insert("ns", Tokens{1, 2, 7}), Partial());
  PrefixTree::Node* fork = mid->parent;
  ASSERT_EQ(fork->depth, 2);
  EXPECT_EQ(fork->n_states_below, 3u);
  EXPECT_EQ(t.CheckInvariants(), "");
  {
    PrefixTree::PruneScope scope(t);
    ASSERT_TRUE(t.RemoveState(a));
    EXPECT_EQ(fork->n_states_below, 2u) << "counts follow at once, pruning waits";
    EXPECT_FALSE(PrefixTree::HasStateBelow(mid));
  }
  ASSERT_TRUE(t.RemoveState(b));  // mid merges into nothing: it is a leaf now, freed
  EXPECT_EQ(t.CheckInvariants(), "");
}

TEST(PrefixTreeTest, CheckInvariantsCatchesAWrongCountOfStatesBelow) {
  PrefixTree t;
  auto* a = t.Insert("ns", Tokens{1, 2, 3, 4});
  t.AddState(a, Partial());
  t.AddState(t.Insert("ns", Tokens{1, 2, 9}), Partial());
  PrefixTree::Node* fork = a->parent;
  ASSERT_EQ(fork->n_states_below, 2u);
  EXPECT_EQ(t.CheckInvariants(), "");
  fork->n_states_below = 1;
  EXPECT_NE(t.CheckInvariants().find("states below"), std::string::npos) << t.CheckInvariants();
  fork->n_states_below = 2;
  a->n_states_below = 1;  // a leaf
  EXPECT_NE(t.CheckInvariants().find("states below"), std::string::npos) << t.CheckInvariants();
}

}  // namespace
}  // namespace hearth::cache
