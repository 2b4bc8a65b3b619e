#include "cache/prefix_cache.h"

#include <algorithm>

#include "cache/disk_store.h"
#include "cache/snapshot_policy.h"

namespace hearth::cache {

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

void PrefixCache::Adopt(const std::string& ns, int32_t seq, std::span<const Token> tokens, int32_t tail_start) {
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
  s.tail_start = tail_start;
  device_state_of_seq_[seq] = tree_.AddState(node, s);
  unwritten_ = true;
  unshared_ = true;
  Unlend(seq);
  // Older device sequences ending on this path hold nothing the new one lacks but their
  // recurrent state: keep that as a partial snapshot (where the policy says) and free them.
  for (PrefixTree::Node* n = node->parent; n; n = n->parent) {
    std::vector<uint64_t> redundant;
    for (const auto& st : n->states) {
      if (st.kind == StateKind::kDevice) redundant.push_back(st.id);
    }
    for (uint64_t id : redundant) {
      State* old = tree_.FindState(id);
      const int32_t old_seq = old->seq;
      const bool serialized = std::any_of(n->states.begin(), n->states.end(),
                                          [](const State& x) { return x.kind != StateKind::kDevice; });
      if (SnapshotPolicy::KeepsPartialOfRedundant(config_.needs_partial, serialized)) {
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
