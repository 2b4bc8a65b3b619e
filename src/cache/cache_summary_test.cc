// SummarizeCache and VisibleTo on a cache without a model (FakeSequenceStore): the tree
// of shared prefixes with its states, the limits, and one namespace's view.
#include "cache/cache_summary.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "cache/fake_sequence_store.h"

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;

Tokens Range(Token from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

Tokens Cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class CacheSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheConfig c;
    c.needs_partial = true;
    c.sequences = {0, 1, 2};
    c.ram_budget_bytes = 1u << 20;
    cache_ = std::make_unique<PrefixCache>(c, store_, nullptr);
  }

  // A request for `prompt` with a partial snapshot at `boundary` (when past what was
  // reused), kept as a device sequence.
  void Turn(const std::string& ns, const Tokens& prompt, size_t boundary) {
    auto lease = cache_->Acquire(ns, prompt, static_cast<int32_t>(prompt.size()) - 1);
    ASSERT_TRUE(lease.has_value());
    size_t done = static_cast<size_t>(lease->report.n_reused);
    if (boundary > done) {
      store_.Extend(lease->seq, Tokens(prompt.begin() + static_cast<long>(done), prompt.begin() + static_cast<long>(boundary)));
      cache_->SnapshotPartial(ns, lease->seq, Tokens(prompt.begin(), prompt.begin() + static_cast<long>(boundary)));
      done = boundary;
    }
    store_.Extend(lease->seq, Tokens(prompt.begin() + static_cast<long>(done), prompt.end()));
    cache_->Adopt(ns, lease->seq, prompt);
    ASSERT_EQ(cache_->CheckInvariants(), "");
  }

  FakeSequenceStore store_{true};
  std::unique_ptr<PrefixCache> cache_;
};

// Invariant 1: every node's parent is listed before it.
void ExpectATree(const CacheSummary& s) {
  std::set<int32_t> seen;
  for (const auto& n : s.nodes) {
    if (n.parent) {
      EXPECT_TRUE(seen.contains(*n.parent)) << "node " << n.id << "'s parent " << *n.parent << " is not listed before it";
    } else {
      EXPECT_EQ(n.depth, 0) << "only roots have no parent";
    }
    seen.insert(n.id);
  }
}

TEST_F(CacheSummaryTest, TheTreeShowsSharedPrefixesAndTheStatesOnThem) {
  const Tokens system = Range(100, 10);
  Turn("m|a", Cat(system, Range(200, 10)), 10);
  Turn("m|a", Cat(system, Range(300, 12)), 10);
  const CacheSummary s = SummarizeCache(*cache_);
  ExpectATree(s);
  ASSERT_EQ(s.nodes.size(), 4u) << "the root, the shared system prompt, two conversations";
  std::map<int32_t, const CacheSummary::Node*> by_depth;
  for (const auto& n : s.nodes) by_depth[n.depth] = &n;
  ASSERT_TRUE(by_depth.contains(10) && by_depth.contains(20) && by_depth.contains(22));
  const auto& shared = *by_depth[10];
  EXPECT_EQ(shared.n_children, 2u);
  ASSERT_EQ(shared.states.size(), 1u);
  EXPECT_EQ(shared.states[0].kind, StateKind::kPartial);
  EXPECT_EQ(shared.states[0].tier, Tier::kRam);
  EXPECT_GT(shared.states[0].bytes, 0u);
  EXPECT_EQ(*by_depth[22]->parent, shared.id);
  ASSERT_EQ(by_depth[22]->states.size(), 1u);
  EXPECT_EQ(by_depth[22]->states[0].tier, Tier::kDevice);
  EXPECT_EQ(s.nodes[0].depth, 0);
  EXPECT_EQ(s.nodes[1].depth, 10);
  EXPECT_EQ(s.nodes[2].depth, 22) << "the most recently used conversation's path comes first";
  EXPECT_FALSE(s.nodes_truncated);

  ASSERT_EQ(s.namespaces.size(), 1u);
  EXPECT_EQ(s.namespaces[0].n_conversations, 2u);
  EXPECT_EQ(s.namespaces[0].n_nodes, 3u);
  EXPECT_EQ(s.namespaces[0].n_states, 3u);
  EXPECT_EQ(s.namespaces[0].tokens_device, 42u);
  EXPECT_EQ(s.namespaces[0].bytes_ram, shared.states[0].bytes);
  EXPECT_EQ(s.n_conversations, 2u);
  EXPECT_EQ(s.device_sequences, 3u);
  EXPECT_EQ(s.ram_budget_bytes, 1u << 20);
}

TEST_F(CacheSummaryTest, LimitsKeepWholePathsOfTheNewestConversations) {
  const Tokens system = Range(100, 10);
  Turn("m|a", Cat(system, Range(200, 10)), 10);
  Turn("m|a", Cat(system, Range(300, 12)), 10);
  const CacheSummary s = SummarizeCache(*cache_, {.max_conversations = 1, .max_nodes = 3});
  ExpectATree(s);
  ASSERT_EQ(s.nodes.size(), 3u) << "the newest conversation's path; the other's leaf does not fit";
  EXPECT_EQ(s.nodes.back().depth, 22);
  EXPECT_TRUE(s.nodes_truncated);
  ASSERT_EQ(s.conversations.size(), 1u);
  EXPECT_EQ(s.conversations[0].n_tokens, 22);
  EXPECT_EQ(s.n_conversations, 2u) << "counts cover what is not listed";

  const CacheSummary tiny = SummarizeCache(*cache_, {.max_nodes = 2});
  ExpectATree(tiny);
  ASSERT_EQ(tiny.nodes.size(), 2u) << "a first path longer than the limit: its part nearest the root";
  EXPECT_EQ(tiny.nodes[0].depth, 0);
  EXPECT_EQ(tiny.nodes[1].depth, 10);
}

TEST_F(CacheSummaryTest, AViewHoldsOnlyItsOwnNamespaces) {
  Turn("m|key-a|", Range(100, 20), 10);
  Turn("m|key-b|", Range(100, 20), 10);
  Turn("m|key-a|salt", Range(500, 8), 4);
  const CacheSummary all = SummarizeCache(*cache_);
  ASSERT_EQ(all.namespaces.size(), 3u);
  const CacheSummary a = VisibleTo(all, [](const std::string& ns) { return ns.starts_with("m|key-a|"); });
  ExpectATree(a);
  ASSERT_EQ(a.namespaces.size(), 2u);
  EXPECT_EQ(a.n_conversations, 2u);
  ASSERT_EQ(a.conversations.size(), 2u);
  size_t roots = 0;
  for (const auto& n : a.nodes) {
    EXPECT_TRUE(n.ns.starts_with("m|key-a|")) << n.ns;
    roots += n.parent ? 0 : 1;
  }
  EXPECT_EQ(roots, 2u);
  for (const auto& c : a.conversations) EXPECT_TRUE(c.ns.starts_with("m|key-a|")) << c.ns;
  EXPECT_EQ(a.stats.n_states, all.stats.n_states) << "the counters stay the whole cache's";

  const CacheSummary none = VisibleTo(all, [](const std::string&) { return false; });
  EXPECT_TRUE(none.nodes.empty());
  EXPECT_TRUE(none.conversations.empty());
  EXPECT_EQ(none.n_conversations, 0u);
}

}  // namespace
}  // namespace hearth::cache
