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
  struct Todo {
    int64_t used;
    uint64_t id;
    uint64_t key;
  };
  std::vector<Todo> todo;
  tree_.ForEachState([&](const PrefixTree::Node* n, const State& s) {
    // A partial state is of no use without the KV another process lacks; a disk state
    // was on the device or in RAM first, and shared from there.
    if (s.kind == StateKind::kPartial || s.tier == Tier::kDisk) return;
    // A reply another sequence took over is dropped, not kept (see Adopt).
    if (s.kind == StateKind::kDevice && DroppableAt(n, s)) return;
    const uint64_t key = StateKey(tree_.NamespaceOf(n), tree_.PathTokens(n), StateKind::kFull);
    if (!shared_keys_.contains(key)) todo.push_back({s.last_used, s.id, key});
  });
  std::sort(todo.begin(), todo.end(), [](const Todo& a, const Todo& b) { return a.used > b.used; });
  int queued = 0;
  for (const Todo& t : todo) {
    if (should_stop()) return queued;
    PrefixTree::Node* node = nullptr;
    State* s = tree_.FindState(t.id, &node);
    if (s == nullptr) continue;
    std::vector<uint8_t> bytes;
    if (s->kind == StateKind::kDevice) {
      auto saved = store_.Save(s->seq, /*partial=*/false);
      if (!saved.ok()) continue;
      bytes = std::move(*saved);
    } else {
      const auto b = Bytes(*s);
      bytes.assign(b.begin(), b.end());
    }
    shared_->Put(tree_.NamespaceOf(node), tree_.PathTokens(node), StateKind::kFull, std::move(bytes));
    shared_keys_.insert(t.key);
    stats_.shared_puts++;
    ++queued;
  }
  queued += ShareGenerationStarts(should_stop);
  unshared_ = false;
  return queued;
}

// A request's generation start (the deepest partial state above its device sequence) is
// where the next prompt leaves the reply when the client sends back another one (an
// agent's re-serialized tool call, a regenerated or edited answer). Locally the partial
// state and the device sequence's KV make a whole state there; another replica needs it
// whole: built in a free sequence (Reseed), serialized, given, and the sequence freed.
int PrefixCache::ShareGenerationStarts(const std::function<bool()>& should_stop) {
  if (!config_.needs_partial) return 0;  // attention only: no partial marks the position
  struct Todo {
    int64_t used;
    const PrefixTree::Node* node;
    int32_t kv_source;
    uint64_t key;
  };
  std::vector<Todo> todo;
  tree_.ForEachState([&](const PrefixTree::Node* n, const State& s) {
    if (s.kind != StateKind::kDevice) return;
    for (const PrefixTree::Node* up = n->parent; up != nullptr && up->depth > 0; up = up->parent) {
      const bool partial = std::any_of(up->states.begin(), up->states.end(),
                                       [](const State& x) { return x.kind == StateKind::kPartial; });
      if (!partial) continue;
      const bool whole = std::any_of(up->states.begin(), up->states.end(),
                                     [](const State& x) { return x.kind != StateKind::kPartial; });
      const uint64_t key = StateKey(tree_.NamespaceOf(up), tree_.PathTokens(up), StateKind::kFull);
      if (!whole && !shared_keys_.contains(key)) todo.push_back({s.last_used, up, s.seq, key});
      return;  // the deepest one only
    }
  });
  std::sort(todo.begin(), todo.end(), [](const Todo& a, const Todo& b) { return a.used > b.used; });
  int queued = 0;
  for (const Todo& t : todo) {
    if (should_stop()) return queued;
    std::optional<int32_t> scratch;
    for (int32_t seq : config_.sequences) {
      if (IsFree(seq)) scratch = seq;
    }
    if (!scratch) return queued;  // never evicts for this: idle cached sequences stay
    lent_[*scratch] = nullptr;
    const std::vector<Token> tokens = tree_.PathTokens(t.node);
    const std::string ns = tree_.NamespaceOf(t.node);
    std::optional<std::vector<uint8_t>> bytes;
    if (Reseed(ns, tokens, *scratch, t.kv_source).ok()) {
      auto saved = store_.Save(*scratch, /*partial=*/false);
      if (saved.ok()) bytes = std::move(*saved);
    }
    Release(*scratch);
    shared_keys_.insert(t.key);  // tried: a failure is not retried at every idle pass
    if (!bytes) continue;
    shared_->Put(ns, tokens, StateKind::kFull, std::move(*bytes));
    stats_.shared_puts++;
    ++queued;
  }
  return queued;
}

}  // namespace hearth::cache
