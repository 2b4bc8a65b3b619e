// StateIndex: the views of the prefix tree's states that the cache looks up on the engine
// thread, kept up to date as the tree's Observer so that no lookup passes over the tree:
//   - the RAM states in eviction order (eviction_order.h), each marked newest of its
//     conversation or not (PrefixTree::HasStateBelow);
//   - the disk states by disk key (two states can share a key, see disk_store.h).
// A RAM state on a held node (Node::held) is in the order, after every state that is not.
//
// Thread safety: none; owned by the engine loop thread, with the tree it follows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/eviction_order.h"
#include "cache/prefix_tree.h"

namespace hearth::cache {

class StateIndex : public PrefixTree::Observer {
 public:
  // The RAM state to evict next at clock `now`: the lowest in the order, so a newest one
  // only when no other is left. nullopt when no RAM state is evictable.
  // REQUIRES: `now` is a Tick() of the tree taken after every state's last use.
  std::optional<EvictionOrder::Entry> NextRamVictim(int64_t now) { return ram_.Lowest(now); }
  // The ids of the disk states stored under `key`.
  std::vector<uint64_t> DiskStates(uint64_t key) const;

  // Empty string when the views hold exactly what `tree` holds, else what differs.
  std::string CheckAgainst(const PrefixTree& tree) const;

  void StateAdded(const PrefixTree::Node* node, const State& s) override;
  void StateRemoved(const PrefixTree::Node* node, const State& s) override;
  void StateUsed(const PrefixTree::Node* node, const State& s) override;
  void BelowChanged(const PrefixTree::Node* node) override;
  void HeldChanged(const PrefixTree::Node* node) override;

 private:
  EvictionOrder ram_;
  std::unordered_multimap<uint64_t, uint64_t> disk_;  // disk key -> state id
};

}  // namespace hearth::cache
