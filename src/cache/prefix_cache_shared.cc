// PrefixCache and the shared tier (prefix_cache.h, "AttachShared"): whole states found by
// position in a store other processes write, and written to it behind.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/shared_store.h"
#include "cache/state_file.h"

namespace hearth::cache {

constexpr size_t kMaxSharedKeys = 1u << 16;
constexpr size_t kMaxShareWhole = 32;  // positions waiting to be made whole

SharedImport PrefixCache::ImportShared(const std::string& ns, std::span<const Token> tokens,
                                       std::span<const int32_t> depths, int32_t max_reuse) {
  SharedImport out;
  if (shared_ == nullptr) return out;
  PrefixTree::PruneScope scope(tree_);
  max_reuse = std::clamp<int32_t>(max_reuse, 0, static_cast<int32_t>(tokens.size()));
  const int32_t local = ResumableDepth(ns, tokens.subspan(0, static_cast<size_t>(max_reuse)));
  std::vector<int32_t> deeper;
  for (int32_t d : depths) {
    if (d > local && d <= max_reuse) deeper.push_back(d);
  }
  if (deeper.empty()) return out;  // nothing the shared tier could add: no round trip
  SharedLookup found = shared_->Find(ns, tokens, deeper, StateKind::kFull);
  out.asked = found.asked;
  out.ms = found.ms;
  out.bytes = found.bytes;
  out.why = std::move(found.why);
  if (!found.hit) return out;
  const auto prefix = tokens.subspan(0, static_cast<size_t>(found.hit->depth));
  shared_keys_.insert(StateKey(ns, prefix, StateKind::kFull));  // it is there already
  Keep(tree_.Insert(ns, prefix), StateKind::kFull, std::move(found.hit->bytes));
  stats_.shared_imports++;
  out.depth = found.hit->depth;
  return out;
}

int PrefixCache::ShareBehind(const std::function<bool()>& should_stop) {
  if (shared_ == nullptr || !unshared_) return 0;
  PrefixTree::PruneScope scope(tree_);
  // A bound on what is remembered: past it states may be given twice (a store keeps one).
  if (shared_keys_.size() > kMaxSharedKeys) shared_keys_.clear();
  if (shared_ids_.size() > kMaxSharedKeys) shared_ids_.clear();
  const Kept given = KeepElsewhere(
      [&](const PrefixTree::Node* n, const State& s) {
        // A partial state is of no use without the KV another process lacks; a disk state
        // was on the device or in RAM first, and shared from there.
        if (s.kind == StateKind::kPartial || s.tier == Tier::kDisk || shared_ids_.contains(s.id)) return false;
        // A state's key is computed until it is known to be in the store, not on every
        // pass: a pass follows each request and visits every state.
        if (!shared_keys_.contains(StateKey(tree_.NamespaceOf(n), tree_.PathTokens(n), StateKind::kFull))) return true;
        shared_ids_.insert(s.id);
        return false;
      },
      should_stop,
      [&](PrefixTree::Node* node, const State& s, std::span<const uint8_t> bytes) {
        shared_ids_.insert(s.id);
        const std::vector<Token> tokens = tree_.PathTokens(node);
        shared_->Put(tree_.NamespaceOf(node), tokens, StateKind::kFull, std::vector<uint8_t>(bytes.begin(), bytes.end()));
        shared_keys_.insert(StateKey(tree_.NamespaceOf(node), tokens, StateKind::kFull));
        stats_.shared_puts++;
        return true;
      });
  if (!given.finished) return given.n;
  int queued = given.n;
  queued += ShareMarkedPositions(should_stop);  // what finds no free sequence waits for the next pass
  unshared_ = false;
  return queued;
}

// A request's generation start is where the next prompt leaves the reply when the client
// sends back another one (an agent's re-serialized tool call, a regenerated or edited
// answer). Locally the partial state there and a device sequence's KV make a whole state;
// another replica needs it whole: built in a free sequence (Reseed) over the KV of a
// device sequence that passes through it, serialized, given, and the sequence freed.
void PrefixCache::ShareWhenIdle(const std::string& ns, std::span<const Token> tokens) {
  if (shared_ == nullptr || !config_.needs_partial) return;  // attention only: Adopt's state serves
  if (share_whole_.size() >= kMaxShareWhole) share_whole_.erase(share_whole_.begin());
  share_whole_.push_back({ns, std::vector<Token>(tokens.begin(), tokens.end())});
  unshared_ = true;
}

int PrefixCache::ShareMarkedPositions(const std::function<bool()>& should_stop) {
  int queued = 0;
  while (!share_whole_.empty()) {
    if (should_stop()) return queued;
    const auto [ns, tokens] = std::move(share_whole_.back());
    share_whole_.pop_back();
    const uint64_t key = StateKey(ns, tokens, StateKind::kFull);
    if (shared_keys_.contains(key)) continue;
    auto m = tree_.MatchPrefix(ns, tokens);
    if (m.n_matched != tokens.size() || m.below != nullptr || m.path.empty()) continue;  // gone
    const PrefixTree::Node* node = m.path.back();
    // Whole already (given by ShareBehind's first pass), or nothing to restore from.
    auto has = [&](auto pred) { return std::any_of(node->states.begin(), node->states.end(), pred); };
    if (has([](const State& x) { return x.kind == StateKind::kDevice || x.kind == StateKind::kFull; })) continue;
    if (!has([](const State& x) { return x.kind == StateKind::kPartial; })) continue;
    std::optional<int32_t> kv_source;
    std::vector<const PrefixTree::Node*> below = {node};
    while (!below.empty() && !kv_source) {
      const PrefixTree::Node* n = below.back();
      below.pop_back();
      for (const State& x : n->states) {
        if (x.kind == StateKind::kDevice) kv_source = x.seq;
      }
      for (const auto& [t, child] : n->children) below.push_back(child.get());
    }
    if (!kv_source) continue;  // no sequence holds its KV any more
    const std::optional<int32_t> scratch = TakeFreeSequence();
    if (!scratch) {  // later: this never evicts a cached sequence
      share_whole_.push_back({ns, tokens});
      return queued;
    }
    std::optional<std::vector<uint8_t>> bytes;
    if (Reseed(ns, tokens, *scratch, *kv_source).ok()) {
      auto saved = store_.Save(*scratch, /*partial=*/false);
      if (saved.ok()) bytes = std::move(*saved);
    }
    Release(*scratch);
    shared_keys_.insert(key);  // tried: a failure is not tried again
    if (!bytes) continue;
    shared_->Put(ns, tokens, StateKind::kFull, std::move(*bytes));
    stats_.shared_puts++;
    ++queued;
  }
  return queued;
}

}  // namespace hearth::cache
