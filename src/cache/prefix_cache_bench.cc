// What a lookup and an eviction cost on the engine thread as the prefix tree grows: a
// Google Benchmark program over PrefixCache with the FakeSequenceStore (no model).
//
//   build/src/hearth_cache_bench                       # 1k, 10k and 50k states
//   build/src/hearth_cache_bench --benchmark_filter=/10000
//
// The tree holds many conversations of three turns each, sharing 16 system prompts:
// partial snapshots at each generation start, full states in RAM where a conversation's
// device sequence was evicted, a few device sequences. The RAM budget is exactly what
// the tree holds, so every new state evicts.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cache/disk_store.h"
#include "cache/fake_sequence_store.h"
#include "cache/prefix_cache.h"

namespace hearth::cache {
namespace {

using Tokens = std::vector<Token>;

constexpr int kSystems = 16;
constexpr int kSystemTokens = 256;
constexpr int kTurns = 3;
constexpr int kSequences = 4;
// Bytes each saved state carries beyond its tokens: partial and full states of similar
// size, so that each snapshot taken under pressure evicts about one state.
constexpr size_t kPadding = 4096;
const std::string kNs = "bench";

Tokens Range(Token from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

Tokens Cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct World {
  std::unique_ptr<FakeSequenceStore> store;
  std::unique_ptr<DiskStore> disk;
  std::unique_ptr<PrefixCache> cache;
  std::vector<Tokens> histories;  // each conversation's tokens so far
  std::string disk_dir;

  ~World() {
    cache.reset();
    disk.reset();
    if (!disk_dir.empty()) std::filesystem::remove_all(disk_dir);
  }
};

// One request: resume, "prefill" with snapshots at the end of the system prompt and the
// start of generation, "generate", adopt.
void Turn(World& w, const Tokens& prompt, const Tokens& reply) {
  auto lease = w.cache->Acquire(kNs, prompt, static_cast<int32_t>(prompt.size()) - 1);
  if (!lease) std::abort();
  auto done = static_cast<size_t>(lease->report.n_reused);
  for (const size_t boundary : {static_cast<size_t>(kSystemTokens), prompt.size()}) {
    if (boundary <= done) continue;
    w.store->Extend(lease->seq, Tokens(prompt.begin() + static_cast<long>(done), prompt.begin() + static_cast<long>(boundary)));
    w.cache->SnapshotPartial(kNs, lease->seq, Tokens(prompt.begin(), prompt.begin() + static_cast<long>(boundary)));
    done = boundary;
  }
  w.store->Extend(lease->seq, reply);
  w.cache->Adopt(kNs, lease->seq, Cat(prompt, reply));
}

// Conversations until the tree holds `n_states` states (with an unbounded RAM tier);
// returns how many it took.
int Build(World& w, size_t n_states, int n_conversations) {
  int c = 0;
  for (; n_conversations > 0 ? c < n_conversations : w.cache->stats().n_states < n_states; ++c) {
    Tokens history = Range(1000 * (c % kSystems + 1), kSystemTokens);
    for (int t = 0; t < kTurns; ++t) {
      const Token base = 100000 + c * 1000 + t * 100;
      const Tokens prompt = Cat(history, Range(base, 24));
      const Tokens reply = Range(base + 50, 16);
      Turn(w, prompt, reply);
      history = Cat(prompt, reply);
    }
    w.histories.push_back(std::move(history));
  }
  return c;
}

// A world of about `n_states` states whose RAM tier is full. With `disk`, a disk tier
// small enough that each state written evicts an older file.
std::unique_ptr<World> MakeWorld(size_t n_states, bool disk) {
  CacheConfig config;
  config.needs_partial = true;
  for (int i = 0; i < kSequences; ++i) config.sequences.push_back(i);
  config.ram_budget_bytes = SIZE_MAX;
  // A dry run finds the RAM the tree needs; the real one gets exactly that budget.
  int n_conversations = 0;
  {
    World dry;
    dry.store = std::make_unique<FakeSequenceStore>(true);
    dry.store->padding = kPadding;
    dry.cache = std::make_unique<PrefixCache>(config, *dry.store, nullptr);
    n_conversations = Build(dry, n_states, 0);
    config.ram_budget_bytes = dry.cache->stats().bytes_ram;
  }

  auto w = std::make_unique<World>();
  w->store = std::make_unique<FakeSequenceStore>(true);
  w->store->padding = kPadding;
  if (disk) {
    w->disk_dir = (std::filesystem::temp_directory_path() / ("hearth-cache-bench-" + std::to_string(n_states))).string();
    std::filesystem::remove_all(w->disk_dir);
    auto d = DiskStore::Open(w->disk_dir, 16u << 10, kNs);
    if (!d.ok()) std::abort();
    w->disk = std::move(*d);
  }
  w->cache = std::make_unique<PrefixCache>(config, *w->store, w->disk.get());
  Build(*w, n_states, n_conversations);
  // A free sequence, so that the operations measured move no device state.
  auto spare = w->cache->Lend();
  if (!spare) std::abort();
  w->cache->Release(*spare);
  return w;
}

// A follow-up turn's lookup and restore: the conversation's full state from RAM. (The
// last few conversations are on the device: a lease would take their sequence over, and
// releasing it would lose them.)
void BM_AcquireFollowUp(benchmark::State& state) {
  auto w = MakeWorld(static_cast<size_t>(state.range(0)), false);
  const size_t n_in_ram = w->histories.size() - kSequences;
  size_t i = 0;
  for (auto _ : state) {
    const Tokens& h = w->histories[(i++ * 7919) % n_in_ram];
    const Tokens prompt = Cat(h, Range(90000000, 8));
    auto lease = w->cache->Acquire(kNs, prompt, static_cast<int32_t>(prompt.size()) - 1);
    if (!lease || lease->report.tier != Tier::kRam || lease->report.n_reused != static_cast<int32_t>(h.size())) std::abort();
    w->cache->Release(lease->seq);
  }
  state.counters["states"] = static_cast<double>(w->cache->stats().n_states);
}

// A new conversation on a shared system prompt: resumes at the prompt's snapshot, with
// attention KV from some state below it.
void BM_AcquireNewConversation(benchmark::State& state) {
  auto w = MakeWorld(static_cast<size_t>(state.range(0)), false);
  int i = 0;
  for (auto _ : state) {
    const Tokens prompt = Cat(Range(1000 * (i++ % kSystems + 1), kSystemTokens), Range(90000000, 8));
    auto lease = w->cache->Acquire(kNs, prompt, static_cast<int32_t>(prompt.size()) - 1);
    if (!lease || lease->report.n_reused != kSystemTokens) std::abort();
    w->cache->Release(lease->seq);
  }
  state.counters["states"] = static_cast<double>(w->cache->stats().n_states);
}

// A snapshot taken under RAM pressure: one state in, the least valuable out (to disk first
// when there is a disk tier, which then forgets the files it evicts). Each conversation's
// snapshots extend its previous one, so the previous becomes evictable in turn.
void SnapshotUnderPressure(benchmark::State& state, bool disk) {
  auto w = MakeWorld(static_cast<size_t>(state.range(0)), disk);
  auto seq = w->cache->Lend();
  if (!seq) std::abort();
  const int64_t evicted0 = w->cache->stats().snapshots_evicted;
  size_t i = 0;
  Token next = 200000000;
  for (auto _ : state) {
    Tokens& h = w->histories[(i++ * 7919) % w->histories.size()];
    h.push_back(next++);
    w->cache->SnapshotPartial(kNs, *seq, h);
  }
  const auto evictions = static_cast<double>(w->cache->stats().snapshots_evicted - evicted0);
  state.counters["evictions/op"] = evictions / static_cast<double>(state.iterations());
  state.counters["states"] = static_cast<double>(w->cache->stats().n_states);
  w->cache->Release(*seq);
}

void BM_SnapshotUnderPressure(benchmark::State& state) { SnapshotUnderPressure(state, false); }
void BM_SnapshotUnderPressureWithDisk(benchmark::State& state) { SnapshotUnderPressure(state, true); }

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(10000)->Arg(50000)->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_AcquireFollowUp)->Apply(Sizes);
BENCHMARK(BM_AcquireNewConversation)->Apply(Sizes);
// A fixed number of operations: the tree's shape drifts with each (smaller states come in
// than go out), and so would the numbers.
BENCHMARK(BM_SnapshotUnderPressure)->Apply(Sizes)->Iterations(1000);
BENCHMARK(BM_SnapshotUnderPressureWithDisk)->Apply(Sizes)->Iterations(1000);

}  // namespace
}  // namespace hearth::cache

BENCHMARK_MAIN();
