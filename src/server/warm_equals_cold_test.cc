// Warm equals cold: a prompt resumed from the prefix cache, from each tier, gives the
// same logits as a full recompute of the same tokens, on every family's test model:
// Gated DeltaNet hybrids (qwen35, qwen35moe, qwen3next), sliding-window attention
// interleaved with global layers (gemma4, window 32: shorter than the prompts; gpt-oss,
// the same window alternating with full layers, attention sinks and MoE), a Mamba-2
// hybrid (granitehybrid) and attention only (qwen3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cache/cache_summary.h"
#include "cache/disk_store.h"
#include "cache/redis_store.h"
#include "cache/prefix_cache.h"
#include "engine/context.h"
#include "server/context_sequence_store.h"
#include "testing/redis_server.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using engine::Token;
using testing::RandomTokens;
using testing::Concat;

class WarmEqualsColdTest : public ::testing::TestWithParam<const char*> {
 protected:
  ::testing::AssertionResult Close(const std::vector<float>& a, const std::vector<float>& b) const {
    return testing::LogitsClose(a, b, ctx_->flash_attn());
  }

  void SetUp() override {
    model_ = testing::LoadTestModel(GetParam());
    ASSERT_NE(model_, nullptr);
    // As the server decides (engine_loop.cc).
    needs_partial_ = model_->info().NeedsPartialStates();
    suffix_states_ = model_->info().HasSuffixStates();
  }

  // A fresh context + cache ("server start"); `n_seqs` sequences, RAM budget, disk dir.
  void Start(int n_seqs, size_t ram, const std::string& disk_dir = "") {
    cache_.reset();
    disk_.reset();
    store_.reset();
    ctx_.reset();
    engine::ContextOptions o;
    o.n_ctx = 2048;
    o.n_batch = 256;
    o.n_ubatch = 256;
    o.n_seq_max = n_seqs + 1;  // the last one computes cold references
    o.n_threads = 1;
    auto c = engine::Context::Create(*model_, o);
    ASSERT_TRUE(c.ok());
    ctx_ = std::move(*c);
    store_ = std::make_unique<ContextSequenceStore>(*ctx_);
    if (!disk_dir.empty()) {
      auto d = cache::DiskStore::Open(disk_dir, 1u << 30, "ns");
      ASSERT_TRUE(d.ok());
      disk_ = std::move(*d);
    }
    cache::CacheConfig cc;
    cc.needs_partial = needs_partial_;
    cc.suffix_states = suffix_states_;
    for (int i = 0; i < n_seqs; ++i) cc.sequences.push_back(i);
    cc.ram_budget_bytes = ram;
    cache_ = std::make_unique<cache::PrefixCache>(cc, *store_, disk_.get());
    if (shared_) cache_->AttachShared(shared_.get());
    cold_seq_ = n_seqs;
  }

  // One request: resume, prefill the rest with snapshots at `marks`, decode `reply`,
  // give the sequence back. Returns the logits after the last prompt token and the
  // number of tokens reused.
  std::pair<std::vector<float>, int> Turn(const std::vector<Token>& prompt, const std::vector<Token>& reply,
                                          const std::vector<size_t>& marks) {
    auto lease = cache_->Acquire("ns", prompt, static_cast<int32_t>(prompt.size()) - 1);
    EXPECT_TRUE(lease.has_value());
    const int seq = lease->seq;
    size_t done = static_cast<size_t>(lease->report.n_reused);
    EXPECT_EQ(ctx_->SeqLength(seq), static_cast<engine::Pos>(done));
    for (size_t m : marks) {
      if (m <= done || m > prompt.size()) continue;
      EXPECT_TRUE(ctx_->Prefill(seq, std::span(prompt).subspan(done, m - done), 0, false).ok());
      done = m;
      cache_->SnapshotPartial("ns", seq, std::span(prompt).subspan(0, m));
    }
    EXPECT_TRUE(ctx_->Prefill(seq, std::span(prompt).subspan(done), 0, true).ok());
    auto l = ctx_->Logits(ctx_->LastPrefillIndex());
    std::vector<float> logits(l.begin(), l.end());
    if (!reply.empty()) {
      EXPECT_TRUE(ctx_->Prefill(seq, reply, 0, false).ok());
    }
    cache_->Adopt("ns", seq, Concat(prompt, reply));
    EXPECT_EQ(cache_->CheckInvariants(), "");
    last_report_ = lease->report;
    return {logits, lease->report.n_reused};
  }

  std::vector<float> Cold(const std::vector<Token>& prompt) {
    ctx_->ClearSeq(cold_seq_);
    EXPECT_TRUE(ctx_->Prefill(cold_seq_, prompt, 0, true).ok());
    auto l = ctx_->Logits(ctx_->LastPrefillIndex());
    std::vector<float> out(l.begin(), l.end());
    ctx_->ClearSeq(cold_seq_);
    return out;
  }

  const engine::Model* model_ = nullptr;
  bool needs_partial_ = true;
  bool suffix_states_ = false;  // where the server keeps them (engine_loop.cc)
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<ContextSequenceStore> store_;
  std::unique_ptr<cache::DiskStore> disk_;
  std::unique_ptr<cache::PrefixCache> cache_;
  int cold_seq_ = 0;
  cache::ResumeReport last_report_;
  std::unique_ptr<cache::SharedStore> shared_;  // null: none
};

TEST_P(WarmEqualsColdTest, ResumeFromTheDevice) {
  Start(3, 64u << 20);
  const auto p1 = RandomTokens(120, 1), r1 = RandomTokens(15, 2);
  Turn(p1, r1, {40, 80});
  // A plain follow-up (the whole history) and a divergence at 100 (the template trap).
  const auto p2 = Concat(Concat(p1, r1), RandomTokens(30, 3));
  auto [warm, reused] = Turn(p2, {}, {});
  EXPECT_EQ(reused, 135);
  EXPECT_EQ(last_report_.restored_bytes, 0u) << "a device sequence is handed over, nothing read back";
  EXPECT_TRUE(Close(Cold(p2), warm));
  const auto p3 = Concat(std::vector<Token>(p1.begin(), p1.begin() + 100), RandomTokens(25, 4));
  auto [warm3, reused3] = Turn(p3, {}, {});
  EXPECT_EQ(reused3, needs_partial_ ? 80 : 100);
  EXPECT_TRUE(Close(Cold(p3), warm3));
}

TEST_P(WarmEqualsColdTest, ResumeFromRam) {
  Start(1, 256u << 20);  // one sequence: each new conversation moves the last to RAM
  const auto p1 = RandomTokens(100, 5), r1 = RandomTokens(10, 6);
  Turn(p1, r1, {50});
  Turn(RandomTokens(60, 7), {}, {});
  ASSERT_GT(cache_->stats().bytes_ram, 0u);
  const auto p2 = Concat(Concat(p1, r1), RandomTokens(20, 8));
  auto [warm, reused] = Turn(p2, {}, {});
  EXPECT_EQ(reused, 110);
  EXPECT_EQ(cache_->stats().hits_ram, 1);
  EXPECT_GT(last_report_.restored_bytes, 0u);
  EXPECT_TRUE(Close(Cold(p2), warm));
}

TEST_P(WarmEqualsColdTest, ResumeFromDiskAfterARestart) {
  const std::string dir = testing::MakeTempDir() + "/disk";
  Start(1, 1, dir);  // no RAM: states go straight to disk
  const auto p1 = RandomTokens(100, 9), r1 = RandomTokens(10, 10);
  Turn(p1, r1, {50});
  Turn(RandomTokens(60, 11), {}, {});
  ASSERT_GT(disk_->bytes(), 0u);
  Start(1, 1, dir);  // restart: new context, new cache, same directory
  const auto p2 = Concat(Concat(p1, r1), RandomTokens(20, 12));
  auto [warm, reused] = Turn(p2, {}, {});
  EXPECT_EQ(reused, 110);
  EXPECT_EQ(cache_->stats().hits_disk, 1);
  EXPECT_GT(last_report_.restored_bytes, 0u);
  EXPECT_TRUE(Close(Cold(p2), warm));
  // The partial snapshot at 50 serves a divergence after it, from disk too.
  const auto p3 = Concat(std::vector<Token>(p1.begin(), p1.begin() + 70), RandomTokens(20, 13));
  auto [warm3, reused3] = Turn(p3, {}, {});
  EXPECT_EQ(reused3, needs_partial_ ? 50 : 70);
  EXPECT_TRUE(Close(Cold(p3), warm3));
}

// Through a real Redis: each replica its own context, cache and connections to it.
TEST_P(WarmEqualsColdTest, ResumeFromTheSharedTierOnAnotherReplica) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.log_path();
  auto replica = [&] {
    cache::RedisOptions o;
    o.url = redis.url();
    auto store = cache::OpenRedisStore(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    cache_.reset();
    shared_ = std::move(*store);
    Start(2, 64u << 20);
  };
  replica();
  const auto p1 = RandomTokens(100, 14), r1 = RandomTokens(10, 15);
  Turn(p1, r1, {50});
  // The reply's end, and (where a partial state marks it) the snapshot at 50 made whole.
  cache_->ShareWhenIdle("ns", std::span(p1).subspan(0, 50));
  ASSERT_EQ(cache_->ShareBehind([] { return false; }), needs_partial_ ? 2 : 1);
  ASSERT_TRUE(shared_->Flush(10000));
  replica();  // another replica: its own context and cache, the same Redis
  const auto p2 = Concat(Concat(p1, r1), RandomTokens(20, 16));
  const cache::SharedImport got =
      cache_->ImportShared("ns", p2, std::vector<int32_t>{50, 110, 130}, static_cast<int32_t>(p2.size()) - 1);
  EXPECT_EQ(got.depth, 110);
  auto [warm, reused] = Turn(p2, {}, {});
  EXPECT_EQ(reused, 110);
  EXPECT_GT(last_report_.restored_bytes, 0u);
  EXPECT_TRUE(Close(Cold(p2), warm));
  if (!needs_partial_) return;
  // A third replica, for a prompt that leaves the first one's at 70: it resumes from the
  // whole state built at 50 out of the partial snapshot and the sequence's KV.
  replica();
  const auto p3 = Concat(std::vector<Token>(p1.begin(), p1.begin() + 70), RandomTokens(20, 17));
  EXPECT_EQ(cache_->ImportShared("ns", p3, std::vector<int32_t>{50, 70}, static_cast<int32_t>(p3.size()) - 1).depth, 50);
  auto [warm3, reused3] = Turn(p3, {}, {});
  EXPECT_EQ(reused3, 50);
  EXPECT_TRUE(Close(Cold(p3), warm3));
}

// Two conversations on one system prompt, both on the device. The one evicted leaves, on
// the hybrids with attention and no sliding window, only its KV past the shared prompt
// (a suffix state) and its recurrent state; its follow-up restores them over the other
// conversation's cells, and computes what a cold prefill of the whole history does.
// Elsewhere the state is saved whole, and the same follow-up holds.
TEST_P(WarmEqualsColdTest, ResumeFromASuffixOverAnotherConversationsPrefix) {
  Start(2, 256u << 20);
  const auto system = RandomTokens(100, 20);
  const auto p1 = Concat(system, RandomTokens(10, 21)), r1 = RandomTokens(5, 22);
  Turn(p1, r1, {100});
  EXPECT_EQ(Turn(Concat(system, RandomTokens(20, 23)), RandomTokens(5, 24), {100}).second, 100);
  ASSERT_EQ(cache_->stats().device_cached, 2);
  ASSERT_TRUE(cache_->EvictIdleDevice());  // the least recent: the first conversation
  std::vector<cache::StateKind> at_115;
  for (const auto& c : cache::SummarizeCache(*cache_, {.max_conversations = 100}).conversations) {
    for (const auto& st : c.states) {
      if (st.position == 115) at_115.push_back(st.kind);
    }
  }
  const auto holds = [&](cache::StateKind k) { return std::ranges::find(at_115, k) != at_115.end(); };
  EXPECT_EQ(holds(cache::StateKind::kSuffix), suffix_states_);
  EXPECT_EQ(holds(cache::StateKind::kFull), !suffix_states_);

  const auto p3 = Concat(Concat(p1, r1), RandomTokens(8, 25));
  auto [warm, reused] = Turn(p3, {}, {});
  EXPECT_EQ(reused, 115);
  EXPECT_EQ(last_report_.tier, cache::Tier::kRam);
  EXPECT_TRUE(Close(Cold(p3), warm));
}

INSTANTIATE_TEST_SUITE_P(Models, WarmEqualsColdTest,
                         ::testing::Values("qwen35", "qwen35moe", "qwen3", "qwen3next", "gemma4", "granitehybrid",
                                           "gpt-oss"),
                         [](const auto& p) { return testing::TestParamName(p.param); });

}  // namespace
}  // namespace hearth::server
