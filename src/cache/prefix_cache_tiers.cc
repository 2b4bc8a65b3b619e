// PrefixCache, tiers: states moving between the device, RAM and disk (eviction of idle
// device sequences, the RAM budget, write-behind). See prefix_cache.h.
#include "cache/prefix_cache.h"

#include <algorithm>
#include <unordered_set>

#include "cache/disk_store.h"

namespace hearth::cache {
namespace {

// The nodes on the path to `node` (itself included).
using Path = std::unordered_set<const PrefixTree::Node*>;
Path PathTo(const PrefixTree::Node* node) {
  Path path;
  for (const PrefixTree::Node* n = node; n != nullptr; n = n->parent) path.insert(n);
  return path;
}

// How many tokens the path to `node` shares with `path` (a radix tree branches where
// paths part, so that is the depth of their deepest common node).
int SharedDepth(const Path& path, const PrefixTree::Node* node) {
  for (const PrefixTree::Node* n = node; n != nullptr; n = n->parent) {
    if (path.contains(n)) return n->depth;
  }
  return 0;
}

// Whether a full or device state lies at `node` or below it (attention KV through it; a
// suffix state's needs another sequence's too).
bool HasAttentionAtOrBelow(const PrefixTree::Node* node) {
  for (const auto& s : node->states) {
    if (s.kind == StateKind::kDevice || s.kind == StateKind::kFull) return true;
  }
  for (const auto& [token, child] : node->children) {
    if (HasAttentionAtOrBelow(child.get())) return true;
  }
  return false;
}

}  // namespace

// States that can go without a copy (DroppableAt) first, then the least recently used.
std::optional<uint64_t> PrefixCache::LeastRecentIdleDevice() {
  std::optional<uint64_t> victim;
  std::pair<bool, int64_t> worst{true, INT64_MAX};
  for (const auto& [seq, id] : device_state_of_seq_) {
    PrefixTree::Node* node = nullptr;
    const State* s = tree_.FindState(id, &node);
    if (!s) continue;
    const std::pair<bool, int64_t> rank{!DroppableAt(node, *s).has_value(), s->last_used};
    if (rank < worst) {
      worst = rank;
      victim = id;
    }
  }
  return victim;
}

bool PrefixCache::EvictIdleDevice() {
  PrefixTree::PruneScope scope(tree_);
  std::optional<uint64_t> victim = LeastRecentIdleDevice();
  if (!victim) return false;
  EvictDevice(*victim);
  return true;
}

bool PrefixCache::SpareASequence() {
  PrefixTree::PruneScope scope(tree_);
  for (int32_t seq : config_.sequences) {
    if (IsFree(seq)) return false;
  }
  int idle = 0;
  for (const auto& [seq, id] : device_state_of_seq_) {
    const State* s = tree_.FindState(id);
    idle += s ? 1 : 0;
  }
  return idle >= 2 && EvictIdleDevice();
}

int PrefixCache::SharedWithDevice(const PrefixTree::Node* node, int32_t seq) {
  const Path path = PathTo(node);
  int shared = 0;
  for (const auto& [other_seq, id] : device_state_of_seq_) {
    PrefixTree::Node* other = nullptr;
    if (other_seq != seq && tree_.FindState(id, &other) != nullptr) shared = std::max(shared, SharedDepth(path, other));
  }
  for (const auto& [lent_seq, at] : lent_) {
    if (at != nullptr) shared = std::max(shared, SharedDepth(path, at));
  }
  return shared;
}

std::optional<std::pair<int32_t, uint64_t>> PrefixCache::SequenceThrough(const PrefixTree::Node* node,
                                                                         int32_t depth) {
  const Path path = PathTo(node);
  for (const auto& [seq, id] : device_state_of_seq_) {
    PrefixTree::Node* other = nullptr;
    if (tree_.FindState(id, &other) != nullptr && SharedDepth(path, other) >= depth) {
      return std::pair{seq, id};
    }
  }
  return std::nullopt;
}

std::optional<int> PrefixCache::DroppableAt(const PrefixTree::Node* node, const State& s) {
  if (s.tail_start <= 0) return std::nullopt;
  const int shared = SharedWithDevice(node, s.seq);
  if (shared < s.tail_start) return std::nullopt;
  return shared;
}

// Drops a device state whose tail another sequence has taken over (see Adopt), and frees
// its sequence. RAM snapshots on its own tail (past `shared`), left without attention KV
// through them, go with it.
void PrefixCache::DropSuperseded(uint64_t state_id, int shared) {
  PrefixTree::Node* node = nullptr;
  State* s = tree_.FindState(state_id, &node);
  const int32_t seq = s->seq;
  device_state_of_seq_.erase(seq);
  s->kind = StateKind::kPartial;  // no longer attention KV below the nodes on its path
  std::vector<uint64_t> gone{state_id};
  for (const PrefixTree::Node* n = node; n != nullptr && n->depth > shared; n = n->parent) {
    if (HasAttentionAtOrBelow(n)) continue;
    for (const auto& st : n->states) {
      if (st.id != state_id && st.tier == Tier::kRam) gone.push_back(st.id);
    }
  }
  for (uint64_t id : gone) Forget(id);
  store_.Clear(seq);
}

// Moves a cached device sequence's full state to RAM (when the budget allows), then
// frees the sequence; one whose tail another sequence has taken over is dropped
// instead (see Adopt). With CacheConfig::suffix_states, a sequence that shares at least
// half its path with another on the device (a shadow's re-rendered tool loop beside the
// request it forked from) leaves a kSuffix state (the attention KV past what they share,
// a few MiB) and a kPartial (its recurrent part) instead of its whole history: restoring
// a whole state writes every position into fresh KV cells beside the cells the other
// sequence already holds for the same tokens, and every later decode step attends over
// both copies (llama.cpp's unified cache spans every cell up to the highest in use).
void PrefixCache::EvictDevice(uint64_t state_id) {
  PrefixTree::Node* node = nullptr;
  State* s = tree_.FindState(state_id, &node);
  if (const std::optional<int> shared = DroppableAt(node, *s)) {
    DropSuperseded(state_id, *shared);
    return;
  }
  const int32_t seq = s->seq;
  const int shared = config_.suffix_states ? SharedWithDevice(node, seq) : 0;
  // The node stays alive while the device state is still on it.
  if (shared > 0 && shared < node->depth && 2 * shared >= node->depth) {
    KeepSuffix(node, seq, shared);
  } else if (auto bytes = store_.Save(seq, /*partial=*/false); bytes.ok()) {
    Keep(node, StateKind::kFull, std::move(*bytes));
  }
  tree_.RemoveState(state_id);
  device_state_of_seq_.erase(seq);
  store_.Clear(seq);
}

// EvictDevice's suffix: a kPartial at `node` (unless one is in RAM there) and the kSuffix,
// both in RAM or neither. A failed save keeps nothing (the sequence goes all the same).
void PrefixCache::KeepSuffix(PrefixTree::Node* node, int32_t seq, int shared) {
  const bool has_partial = std::any_of(node->states.begin(), node->states.end(), [](const State& st) {
    return st.kind == StateKind::kPartial && st.tier == Tier::kRam;
  });
  StatusOr<std::vector<uint8_t>> partial = std::vector<uint8_t>{};
  if (!has_partial) partial = store_.Save(seq, /*partial=*/true);
  if (!partial.ok()) return;
  auto suffix = store_.SaveSuffix(seq, shared);
  if (!suffix.ok() || suffix->size() + partial->size() > config_.ram_budget_bytes) return;
  if (!has_partial) AddRamState(node, StateKind::kPartial, std::move(*partial));
  const uint64_t id = AddRamState(node, StateKind::kSuffix, std::move(*suffix));
  tree_.FindState(id)->suffix_from = shared;
  EnforceRamBudget();
}

void PrefixCache::Keep(PrefixTree::Node* node, StateKind kind, std::vector<uint8_t> bytes) {
  if (bytes.size() <= config_.ram_budget_bytes) {
    AddRamState(node, kind, std::move(bytes));
    EnforceRamBudget();
    return;
  }
  if (disk_ && AddDiskState(node, kind, bytes, /*last_used=*/0)) {
    stats_.snapshots_taken++;
    return;
  }
  tree_.PruneIfUseless(node);
}

uint64_t PrefixCache::AddRamState(PrefixTree::Node* node, StateKind kind, std::vector<uint8_t> bytes) {
  State s;
  s.kind = kind;
  s.tier = Tier::kRam;
  s.bytes = bytes.size();
  const uint64_t id = tree_.AddState(node, s);
  ram_bytes_ += bytes.size();
  ram_[id] = std::move(bytes);
  stats_.snapshots_taken++;
  unwritten_ = true;
  unshared_ = true;
  return id;
}

std::span<const uint8_t> PrefixCache::Bytes(const State& s) {
  auto it = ram_.find(s.id);
  if (it == ram_.end()) return {};
  return it->second;
}

// Drops RAM states, least valuable first, until the budget holds. Value: tokens of
// recompute a state saves per byte, discounted by how long ago it was used. The newest
// state of each conversation (nothing stored below it) goes only when nothing else is
// left: it is where that conversation's next turn resumes. Held states (see Hold) go
// after those, and only once the least recently held one has lost its hold. The index
// keeps that order (eviction_order.h). States go to disk first when a disk tier exists.
void PrefixCache::EnforceRamBudget() {
  EnforceHolds();
  while (ram_bytes_ > config_.ram_budget_bytes) {
    std::optional<EvictionOrder::Entry> lowest = index_.NextRamVictim(tree_.Tick());
    // Newest states are ranked a tick later, as when they were a second pass over the
    // tree: the clock, and so every later choice, runs as it did.
    if (!lowest || lowest->newest) lowest = index_.NextRamVictim(tree_.Tick());
    if (!lowest) break;
    // Only held states are left: the pin budget is more than RAM holds.
    if (lowest->held && UnholdLeastRecent()) continue;
    const uint64_t victim = lowest->id;
    PrefixTree::Node* node = nullptr;
    State* s = tree_.FindState(victim, &node);
    auto it = ram_.find(victim);
    if (disk_ && it != ram_.end() && s->kind != StateKind::kSuffix && !HasDiskTwin(node, s->kind)) {
      AddDiskState(node, s->kind, it->second, s->last_used);
    }
    Forget(victim);
  }
}

void PrefixCache::Forget(uint64_t id) {
  if (auto it = ram_.find(id); it != ram_.end()) {
    ram_bytes_ -= it->second.size();
    ram_.erase(it);
  }
  tree_.RemoveState(id);
  stats_.snapshots_evicted++;
}

void PrefixCache::ForgetDiskKeys(const std::vector<uint64_t>& keys) {
  std::vector<uint64_t> gone;
  for (uint64_t key : keys) {
    for (uint64_t id : index_.DiskStates(key)) gone.push_back(id);
  }
  std::sort(gone.begin(), gone.end());
  gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
  for (uint64_t id : gone) Forget(id);
}

// The disk may evict files to make room; their states leave the tree, which can move
// states on `node` (callers hold ids, not State pointers, across this call).
bool PrefixCache::AddDiskState(PrefixTree::Node* node, StateKind kind, std::span<const uint8_t> bytes,
                               int64_t last_used) {
  auto key = disk_->Write(tree_.NamespaceOf(node), tree_.PathTokens(node), kind, bytes);
  if (!key.ok()) return false;
  ForgetDiskKeys(disk_->evicted());
  State d;
  d.kind = kind;
  d.tier = Tier::kDisk;
  d.disk_key = *key;
  d.bytes = bytes.size();
  d.last_used = last_used;
  tree_.AddState(node, d);
  return true;
}

bool PrefixCache::HasDiskTwin(const PrefixTree::Node* node, StateKind kind) {
  const StateKind on_disk = kind == StateKind::kPartial ? StateKind::kPartial : StateKind::kFull;
  return std::any_of(node->states.begin(), node->states.end(),
                     [&](const State& s) { return s.tier == Tier::kDisk && s.kind == on_disk; });
}

PrefixCache::Kept PrefixCache::KeepElsewhere(const std::function<bool(const PrefixTree::Node*, const State&)>& wanted,
                                             const std::function<bool()>& should_stop, const KeepFn& keep) {
  std::vector<std::pair<int64_t, uint64_t>> todo;  // (last_used, id)
  tree_.ForEachState([&](const PrefixTree::Node* n, const State& s) {
    // A tail another sequence took over is dropped, not kept (see Adopt); a suffix needs
    // this device's sequences.
    if (s.kind == StateKind::kDevice && DroppableAt(n, s)) return;
    if (s.kind == StateKind::kSuffix) return;
    if (wanted(n, s)) todo.emplace_back(s.last_used, s.id);
  });
  std::sort(todo.rbegin(), todo.rend());
  Kept kept;
  for (const auto& [used, id] : todo) {
    if (should_stop()) return kept;
    PrefixTree::Node* node = nullptr;
    State* s = tree_.FindState(id, &node);
    if (s == nullptr) continue;
    // A device sequence is serialized; a RAM state's bytes are given as they are.
    std::vector<uint8_t> serialized;
    if (s->kind == StateKind::kDevice) {
      auto saved = store_.Save(s->seq, /*partial=*/false);
      if (!saved.ok()) continue;
      serialized = std::move(*saved);
    }
    const std::span<const uint8_t> bytes = s->kind == StateKind::kDevice ? serialized : Bytes(*s);
    if (keep(node, *s, bytes)) ++kept.n;
  }
  kept.finished = true;
  return kept;
}

int PrefixCache::WriteBehind(const std::function<bool()>& should_stop) {
  if (disk_ == nullptr || !unwritten_) return 0;
  PrefixTree::PruneScope scope(tree_);
  const Kept written = KeepElsewhere(
      [&](const PrefixTree::Node* n, const State& s) { return s.tier != Tier::kDisk && !HasDiskTwin(n, s.kind); },
      should_stop,
      [&](PrefixTree::Node* node, const State& s, std::span<const uint8_t> bytes) {
        const StateKind kind = s.kind == StateKind::kPartial ? StateKind::kPartial : StateKind::kFull;
        return AddDiskState(node, kind, bytes, s.last_used);
      });
  if (written.finished) unwritten_ = false;
  return written.n;
}

}  // namespace hearth::cache
