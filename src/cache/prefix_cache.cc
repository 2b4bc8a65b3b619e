#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "cache/disk_store.h"

namespace hearth::cache {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Cheapest tier first.
int TierCost(Tier t) { return t == Tier::kDevice ? 0 : t == Tier::kRam ? 1 : 2; }

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

// Whether a full or device state lies at `node` or below it (attention KV through it).
bool HasAttentionAtOrBelow(const PrefixTree::Node* node) {
  for (const auto& s : node->states) {
    if (s.kind != StateKind::kPartial) return true;
  }
  for (const auto& [token, child] : node->children) {
    if (HasAttentionAtOrBelow(child.get())) return true;
  }
  return false;
}

}  // namespace

// What a resume at some depth restores from: one state for the attention part (and the
// recurrent part, when it sits exactly at the depth), plus a partial state when the
// attention source lies deeper.
struct PrefixCache::Source {
  uint64_t attention = 0;           // kDevice or kFull state at or below the depth
  std::optional<uint64_t> partial;  // state at exactly the depth, when attention is deeper
  Tier tier = Tier::kDevice;
};

PrefixCache::PrefixCache(CacheConfig config, SequenceStore& store, DiskStore* disk)
    : config_(std::move(config)), store_(store), disk_(disk) {
  tree_.SetObserver(&index_);
  if (disk_) {
    for (const auto& e : disk_->Scan()) {
      PrefixTree::Node* node = tree_.Insert(e.ns, e.tokens);
      State s;
      s.kind = e.kind;
      s.tier = Tier::kDisk;
      s.bytes = e.bytes;
      s.disk_key = e.key;
      tree_.AddState(node, s);
    }
  }
}

PrefixCache::~PrefixCache() = default;

bool PrefixCache::IsFree(int32_t seq) const { return !lent_.contains(seq) && !device_state_of_seq_.contains(seq); }

std::optional<PrefixCache::Lease> PrefixCache::Acquire(const std::string& ns, std::span<const Token> tokens,
                                                       int32_t max_reuse, Lookup lookup) {
  PrefixTree::PruneScope scope(tree_);
  // A cached device sequence that is itself the deepest usable state on the path is
  // simply handed over.
  max_reuse = std::min<int32_t>(max_reuse, static_cast<int32_t>(tokens.size()));
  auto m = tree_.MatchPrefix(ns, tokens.subspan(0, static_cast<size_t>(std::max(0, max_reuse))));
  for (auto it = m.path.rbegin(); it != m.path.rend() && (*it)->depth > 0; ++it) {
    const State* own = nullptr;
    for (const auto& s : (*it)->states) {
      if (s.kind == StateKind::kDevice) own = &s;
    }
    const bool deeper_possible = !config_.needs_partial && m.below != nullptr;
    if (own && !deeper_possible) {
      Lease lease;
      lease.seq = own->seq;
      lease.report.n_reused = (*it)->depth;
      lease.report.n_matched = static_cast<int32_t>(m.n_matched);
      lease.report.tier = Tier::kDevice;
      if (lease.report.n_reused < lease.report.n_matched) {
        lease.report.stopped_because = "the cache knows " + std::to_string(m.n_matched) + " tokens of this prompt but holds no state past " +
                                       std::to_string(lease.report.n_reused);
      }
      device_state_of_seq_.erase(own->seq);
      tree_.PinNode(*it);
      tree_.RemoveState(own->id);
      lent_[lease.seq] = *it;
      if (lookup == Lookup::kRequest) CountRequestLookup(lease.report);
      return lease;
    }
    if (!(*it)->states.empty()) break;  // a deeper non-device state may serve better
  }
  std::optional<int32_t> seq = TakeSequence();
  if (!seq) return std::nullopt;
  Lease lease;
  lease.seq = *seq;
  lease.report = Resume(ns, *seq, tokens, max_reuse);
  if (lookup == Lookup::kRequest) CountRequestLookup(lease.report);
  return lease;
}

void PrefixCache::CountRequestLookup(const ResumeReport& report) {
  if (report.n_reused == 0) {
    stats_.misses++;
    return;
  }
  switch (report.tier) {
    case Tier::kDevice: stats_.hits_device++; break;
    case Tier::kRam: stats_.hits_ram++; break;
    case Tier::kDisk: stats_.hits_disk++; break;
    case Tier::kShared: stats_.hits_shared++; break;
  }
  stats_.tokens_reused += report.n_reused;
}

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

std::optional<int32_t> PrefixCache::TakeFreeSequence() {
  for (int32_t seq : config_.sequences) {
    if (IsFree(seq)) {
      lent_[seq] = nullptr;
      return seq;
    }
  }
  return std::nullopt;
}

std::optional<int32_t> PrefixCache::TakeSequence() {
  if (auto seq = TakeFreeSequence()) return seq;
  // Evict the least recently used cached device sequence.
  std::optional<uint64_t> victim = LeastRecentIdleDevice();
  if (!victim) return std::nullopt;
  const int32_t seq = tree_.FindState(*victim)->seq;
  EvictDevice(*victim);
  lent_[seq] = nullptr;
  return seq;
}

std::optional<int> PrefixCache::DroppableAt(const PrefixTree::Node* node, const State& s) {
  if (s.reply_start <= 0) return std::nullopt;
  const Path path = PathTo(node);
  int shared = 0;
  for (const auto& [other_seq, id] : device_state_of_seq_) {
    PrefixTree::Node* other = nullptr;
    if (other_seq != s.seq && tree_.FindState(id, &other) != nullptr) shared = std::max(shared, SharedDepth(path, other));
  }
  for (const auto& [lent_seq, at] : lent_) {
    if (at != nullptr) shared = std::max(shared, SharedDepth(path, at));
  }
  if (shared < s.reply_start) return std::nullopt;
  return shared;
}

// Drops a device state whose reply another sequence has taken over (see Adopt), and frees
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
// frees the sequence; one whose reply another sequence has taken over is dropped
// instead (see Adopt).
void PrefixCache::EvictDevice(uint64_t state_id) {
  PrefixTree::Node* node = nullptr;
  State* s = tree_.FindState(state_id, &node);
  if (const std::optional<int> shared = DroppableAt(node, *s)) {
    DropSuperseded(state_id, *shared);
    return;
  }
  const int32_t seq = s->seq;
  auto bytes = store_.Save(seq, /*partial=*/false);
  // The node stays alive while the device state is still on it.
  if (bytes.ok()) Keep(node, StateKind::kFull, std::move(*bytes));
  tree_.RemoveState(state_id);
  device_state_of_seq_.erase(seq);
  store_.Clear(seq);
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

// The best state to restore the attention part for depth `depth` from: a device
// sequence or a full state at `node` or below. With `need_exact`, the recurrent part must
// come from a state at exactly `node` too.
std::optional<PrefixCache::Source> PrefixCache::FindSource(PrefixTree::Node* node, bool need_exact, int32_t depth) {
  // Cheapest tier first; among serialized states the smallest (a full state far deeper
  // than `depth` costs its whole length in time and free KV cells to restore).
  std::optional<Source> best;
  size_t best_bytes = 0;
  auto consider = [&](const State& s, std::optional<uint64_t> partial) {
    if (s.kind == StateKind::kPartial) return;
    Tier t = s.tier;
    if (partial) {
      const State* p = tree_.FindState(*partial);
      if (p && TierCost(p->tier) > TierCost(t)) t = p->tier;
    }
    const size_t bytes = s.kind == StateKind::kDevice ? 0 : s.bytes;
    if (!best || TierCost(t) < TierCost(best->tier) || (TierCost(t) == TierCost(best->tier) && bytes < best_bytes)) {
      best = Source{s.id, partial, t};
      best_bytes = bytes;
    }
  };
  // States exactly here carry both parts.
  const bool at_depth = node->depth == depth;
  if (at_depth) {
    for (const auto& s : node->states) consider(s, std::nullopt);
    if (best && best->tier == Tier::kDevice) return best;
  }
  std::optional<uint64_t> partial;
  if (need_exact) {
    if (!at_depth) return best;
    for (const auto& s : node->states) {
      if (s.kind == StateKind::kPartial && (!partial || s.tier == Tier::kRam)) partial = s.id;
    }
    if (!partial) return best;
  }
  // Attention from anything deeper on this path: the node itself when the depth lies
  // inside its edge, and everything below it.
  std::vector<PrefixTree::Node*> stack;
  if (!at_depth) {
    stack.push_back(node);
  } else {
    for (auto& [tok, child] : node->children) stack.push_back(child.get());
  }
  while (!stack.empty()) {
    PrefixTree::Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->states) consider(s, partial);
    for (auto& [tok, child] : n->children) stack.push_back(child.get());
  }
  return best;
}

// Restores a serialized state (RAM or disk) into `seq`. A disk file that fails its
// checks (corrupt: quarantined by the store; unreadable; or holding another state, whose
// key collided with this one's) is never restored, and its state is forgotten here, as
// is a RAM state the context refused for any reason but room.
Status PrefixCache::RestoreSerialized(uint64_t id, int32_t seq, bool partial) {
  PrefixTree::Node* node = nullptr;
  State* s = tree_.FindState(id, &node);
  if (s == nullptr) return Internal("state vanished");
  tree_.Touch(id);
  if (s->tier != Tier::kDisk) {
    restored_bytes_ += Bytes(*s).size();
    Status restored = store_.Restore(seq, Bytes(*s), partial);
    // Bytes the context refused once it refuses again: forget them rather than fail
    // every later request on this path. A state that lacked room stays (see Acquire).
    if (!restored.ok() && restored.code() != StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "hearth: a RAM state at position %d failed to restore (%s); dropped\n", node->depth,
                   restored.message().c_str());
      Forget(id);
    }
    return restored;
  }
  auto loaded = disk_->Read(s->disk_key, tree_.NamespaceOf(node), tree_.PathTokens(node), s->kind);
  if (!loaded.ok()) {
    tree_.RemoveState(id);
    return loaded.status();
  }
  restored_bytes_ += loaded->size();
  return store_.Restore(seq, *loaded, partial);
}

Status PrefixCache::Execute(int32_t seq, const Source& src, int32_t depth) {
  State* a = tree_.FindState(src.attention);
  if (a == nullptr) return Internal("state vanished");
  if (a->kind == StateKind::kDevice) {
    tree_.Touch(src.attention);
    store_.Copy(a->seq, seq, depth);
  } else {
    HEARTH_RETURN_IF_ERROR(RestoreSerialized(src.attention, seq, /*partial=*/false));
  }
  if (src.partial) HEARTH_RETURN_IF_ERROR(RestoreSerialized(*src.partial, seq, /*partial=*/true));
  HEARTH_RETURN_IF_ERROR(store_.Truncate(seq, depth));
  if (store_.Length(seq) != depth) {
    return Internal("restored sequence holds " + std::to_string(store_.Length(seq)) + " positions, expected " +
                    std::to_string(depth));
  }
  return Status::Ok();
}

ResumeReport PrefixCache::Resume(const std::string& ns, int32_t seq, std::span<const Token> tokens,
                                 int32_t max_reuse) {
  const auto t0 = std::chrono::steady_clock::now();
  ResumeReport report;
  restored_bytes_ = 0;
  max_reuse = std::min<int32_t>(max_reuse, static_cast<int32_t>(tokens.size()));
  auto m = tree_.MatchPrefix(ns, tokens.subspan(0, static_cast<size_t>(std::max(0, max_reuse))));
  report.n_matched = static_cast<int32_t>(m.n_matched);
  if (m.n_matched == 0) {
    report.stopped_because = "no cached prefix";
    return report;
  }
  // Candidate depths, deepest first. Attention-only models can stop inside an edge.
  struct Candidate {
    PrefixTree::Node* node;
    int32_t depth;
  };
  std::vector<Candidate> candidates;
  if (!config_.needs_partial && m.below) candidates.push_back({m.below, static_cast<int32_t>(m.n_matched)});
  for (auto it = m.path.rbegin(); it != m.path.rend(); ++it) {
    if ((*it)->depth > 0) candidates.push_back({*it, (*it)->depth});
  }
  std::vector<uint64_t> failed;  // a source that failed once (no room for it) fails again
  for (const auto& c : candidates) {
    auto src = FindSource(c.node, config_.needs_partial, c.depth);
    if (!src || std::find(failed.begin(), failed.end(), src->attention) != failed.end()) continue;
    Status s = Execute(seq, *src, c.depth);
    // A whole state needs free KV cells: idle cached sequences give theirs up (to RAM)
    // before the restore is given up. That may move states between tiers: look again.
    while (s.code() == StatusCode::kResourceExhausted && EvictIdleDevice()) {
      store_.Clear(seq);
      src = FindSource(c.node, config_.needs_partial, c.depth);
      if (!src) break;
      s = Execute(seq, *src, c.depth);
    }
    if (!s.ok()) {
      store_.Clear(seq);
      if (!src) continue;
      failed.push_back(src->attention);
      report.no_room = s.code() == StatusCode::kResourceExhausted;
      report.stopped_because = "restore at " + std::to_string(c.depth) + " failed: " +
                               (report.no_room ? "no free KV cells for its " + std::to_string(c.depth) +
                                                     " positions while the requests running hold theirs"
                                               : s.message());
      continue;
    }
    report.no_room = false;
    report.n_reused = c.depth;
    report.tier = src->tier;
    if (!report.stopped_because.empty()) {
      // A deeper restore failed: that is why reuse stopped here, and the caller says so.
      report.stopped_because += "; resumed at " + std::to_string(c.depth);
    } else if (c.depth < static_cast<int32_t>(m.n_matched)) {
      report.stopped_because = "no usable state between position " + std::to_string(c.depth) + " and " +
                               std::to_string(m.n_matched) + " where the prompt leaves the cache";
    }
    break;
  }
  if (report.n_reused == 0 && report.stopped_because.empty()) {
    report.stopped_because = "matched " + std::to_string(m.n_matched) + " tokens but no usable state on the way";
  }
  report.restore_ms = MsSince(t0);
  report.restored_bytes = restored_bytes_;
  EnforceRamBudget();
  return report;
}

bool PrefixCache::Holds(const std::string& ns, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  if (tokens.empty()) return false;
  auto m = tree_.MatchPrefix(ns, tokens);
  if (m.n_matched != tokens.size()) return false;
  const auto depth = static_cast<int32_t>(tokens.size());
  if (config_.needs_partial) {
    return m.below == nullptr && !m.path.empty() && FindSource(m.path.back(), true, depth).has_value();
  }
  PrefixTree::Node* node = m.below != nullptr ? m.below : m.path.empty() ? nullptr : m.path.back();
  return node != nullptr && FindSource(node, false, depth).has_value();
}

int32_t PrefixCache::ResumableDepth(const std::string& ns, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  auto m = tree_.MatchPrefix(ns, tokens);
  if (!config_.needs_partial && m.below != nullptr && FindSource(m.below, false, static_cast<int32_t>(m.n_matched))) {
    return static_cast<int32_t>(m.n_matched);
  }
  for (auto it = m.path.rbegin(); it != m.path.rend() && (*it)->depth > 0; ++it) {
    if (FindSource(*it, config_.needs_partial, (*it)->depth)) return (*it)->depth;
  }
  return 0;
}

void PrefixCache::SnapshotPartial(const std::string& ns, int32_t seq, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  if (!config_.needs_partial || tokens.empty()) return;
  // A position that already has a state needs no second one.
  auto m = tree_.MatchPrefix(ns, tokens);
  if (m.n_matched == tokens.size() && !m.below && !m.path.back()->states.empty()) return;
  auto bytes = store_.Save(seq, /*partial=*/true);
  if (!bytes.ok()) return;
  Keep(tree_.Insert(ns, tokens), StateKind::kPartial, std::move(*bytes));
}

void PrefixCache::Adopt(const std::string& ns, int32_t seq, std::span<const Token> tokens, int32_t reply_start) {
  PrefixTree::PruneScope scope(tree_);
  if (tokens.empty()) {
    Unlend(seq);
    store_.Clear(seq);
    return;
  }
  PrefixTree::Node* node = tree_.Insert(ns, tokens);
  State s;
  s.kind = StateKind::kDevice;
  s.tier = Tier::kDevice;
  s.seq = seq;
  s.reply_start = reply_start;
  device_state_of_seq_[seq] = tree_.AddState(node, s);
  unwritten_ = true;
  unshared_ = true;
  Unlend(seq);
  // Older device sequences ending on this path hold nothing the new one lacks but their
  // recurrent state: keep that as a partial snapshot and free them.
  for (PrefixTree::Node* n = node->parent; n; n = n->parent) {
    std::vector<uint64_t> redundant;
    for (const auto& st : n->states) {
      if (st.kind == StateKind::kDevice) redundant.push_back(st.id);
    }
    for (uint64_t id : redundant) {
      State* old = tree_.FindState(id);
      const int32_t old_seq = old->seq;
      const bool has_partial = std::any_of(n->states.begin(), n->states.end(),
                                           [](const State& x) { return x.kind != StateKind::kDevice; });
      if (config_.needs_partial && !has_partial) {
        auto bytes = store_.Save(old_seq, /*partial=*/true);
        if (bytes.ok()) Keep(n, StateKind::kPartial, std::move(*bytes));
      }
      tree_.RemoveState(id);
      device_state_of_seq_.erase(old_seq);
      store_.Clear(old_seq);
    }
  }
  EnforceRamBudget();
}

std::optional<int32_t> PrefixCache::Fork(int32_t seq) {
  PrefixTree::PruneScope scope(tree_);
  std::optional<int32_t> dst = TakeSequence();
  if (!dst) return std::nullopt;
  store_.Copy(seq, *dst, store_.Length(seq));
  return dst;
}

std::optional<int32_t> PrefixCache::Lend() {
  PrefixTree::PruneScope scope(tree_);
  std::optional<int32_t> seq = TakeSequence();
  if (seq) store_.Clear(*seq);
  return seq;
}

Status PrefixCache::Reseed(const std::string& ns, std::span<const Token> tokens, int32_t seq, int32_t kv_source) {
  PrefixTree::PruneScope scope(tree_);
  const auto depth = static_cast<int32_t>(tokens.size());
  store_.Clear(seq);
  store_.Copy(kv_source, seq, depth);
  if (config_.needs_partial) {
    auto m = tree_.MatchPrefix(ns, tokens);
    std::optional<uint64_t> partial, full;
    if (m.n_matched == tokens.size() && m.below == nullptr && !m.path.empty()) {
      for (const auto& st : m.path.back()->states) {
        if (st.kind == StateKind::kDevice) {  // holds exactly `tokens`: both parts
          store_.Clear(seq);
          store_.Copy(st.seq, seq, depth);
          return Status::Ok();
        }
        auto& slot = st.kind == StateKind::kPartial ? partial : full;
        if (!slot || st.tier == Tier::kRam) slot = st.id;
      }
    }
    if (!partial && full) store_.Clear(seq);  // a full state replaces everything
    if (!partial && !full) {
      store_.Clear(seq);
      return NotFound("no state at position " + std::to_string(depth));
    }
    if (Status s = RestoreSerialized(partial ? *partial : *full, seq, /*partial=*/partial.has_value()); !s.ok()) {
      store_.Clear(seq);
      return s;
    }
  }
  if (store_.Length(seq) != depth) {
    store_.Clear(seq);
    return Internal("reseeded sequence holds " + std::to_string(store_.Length(seq)) + " positions, expected " +
                    std::to_string(depth));
  }
  return Status::Ok();
}

void PrefixCache::Release(int32_t seq) {
  PrefixTree::PruneScope scope(tree_);
  Unlend(seq);
  store_.Clear(seq);
}

void PrefixCache::Unlend(int32_t seq) {
  auto it = lent_.find(seq);
  if (it == lent_.end()) return;
  if (it->second != nullptr) tree_.UnpinNode(it->second);
  lent_.erase(it);
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
    if (disk_ && it != ram_.end() && !HasDiskTwin(node, s->kind)) AddDiskState(node, s->kind, it->second, s->last_used);
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
    // A reply another sequence took over is dropped, not kept (see Adopt).
    if (s.kind == StateKind::kDevice && DroppableAt(n, s)) return;
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

std::vector<Token> PrefixCache::EarlierContinuation(const std::string& ns, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  auto m = tree_.MatchPrefix(ns, tokens);
  if (m.path.empty()) return {};
  PrefixTree::Node* node = m.below;
  if (node == nullptr) {
    const auto& kids = m.path.back()->children;
    if (kids.empty()) return {};
    node = kids.begin()->second.get();
  }
  while (!node->children.empty()) node = node->children.begin()->second.get();
  return tree_.PathTokens(node);
}

std::string PrefixCache::CheckInvariants() const {
  std::string err = tree_.CheckInvariants();
  err += index_.CheckAgainst(tree_);
  size_t bytes = 0;
  for (const auto& [id, b] : ram_) bytes += b.size();
  if (bytes != ram_bytes_) err += "RAM bytes miscounted; ";
  return err;
}

CacheStats PrefixCache::stats() const {
  CacheStats s = stats_;
  s.bytes_ram = ram_bytes_;
  s.bytes_disk = disk_ ? disk_->bytes() : 0;
  s.snapshots_quarantined = disk_ ? static_cast<int64_t>(disk_->quarantined()) : 0;  // at start-up too
  s.disk_read_errors = disk_ ? static_cast<int64_t>(disk_->read_errors()) : 0;
  s.disk_write_errors = disk_ ? static_cast<int64_t>(disk_->write_errors()) : 0;
  s.device_cached = static_cast<int>(device_state_of_seq_.size());
  for (const auto& [node, h] : holds_) s.bytes_held += RamBytesAt(node);
  s.n_holds = holds_.size();
  s.holds_released = holds_released_;
  s.n_nodes = tree_.n_nodes();
  s.n_states = tree_.n_states();
  return s;
}

size_t PrefixCache::disk_budget() const { return disk_ ? disk_->budget() : 0; }

}  // namespace hearth::cache
