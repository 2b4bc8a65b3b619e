#include "cache/state_index.h"

#include <algorithm>

namespace hearth::cache {

std::vector<uint64_t> StateIndex::DiskStates(uint64_t key) const {
  std::vector<uint64_t> ids;
  auto [from, to] = disk_.equal_range(key);
  for (auto it = from; it != to; ++it) ids.push_back(it->second);
  return ids;
}

void StateIndex::StateAdded(const PrefixTree::Node* node, const State& s) {
  if (s.tier == Tier::kDisk) disk_.emplace(s.disk_key, s.id);
  if (s.tier != Tier::kRam) return;
  ram_.Insert({s.id, node->depth, static_cast<int64_t>(s.bytes), s.last_used, !PrefixTree::HasStateBelow(node), node->held});
}

void StateIndex::StateRemoved(const PrefixTree::Node*, const State& s) {
  if (s.tier == Tier::kRam) ram_.Erase(s.id);
  if (s.tier != Tier::kDisk) return;
  auto [from, to] = disk_.equal_range(s.disk_key);
  for (auto it = from; it != to; ++it) {
    if (it->second == s.id) {
      disk_.erase(it);
      return;
    }
  }
}

void StateIndex::StateUsed(const PrefixTree::Node*, const State& s) { ram_.SetLastUsed(s.id, s.last_used); }

void StateIndex::BelowChanged(const PrefixTree::Node* node) {
  for (const State& s : node->states) ram_.SetNewest(s.id, !PrefixTree::HasStateBelow(node));
}

void StateIndex::HeldChanged(const PrefixTree::Node* node) {
  for (const State& s : node->states) ram_.SetHeld(s.id, node->held);
}

std::string StateIndex::CheckAgainst(const PrefixTree& tree) const {
  std::string err = ram_.CheckInvariants();
  size_t n_ram = 0, n_disk = 0;
  tree.ForEachState([&](const PrefixTree::Node* node, const State& s) {
    const std::string id = "state " + std::to_string(s.id);
    if (s.tier == Tier::kDisk) {
      ++n_disk;
      const std::vector<uint64_t> ids = DiskStates(s.disk_key);
      if (std::find(ids.begin(), ids.end(), s.id) == ids.end()) err += id + " not under its disk key; ";
    }
    if (s.tier != Tier::kRam) return;
    ++n_ram;
    const EvictionOrder::Entry* e = ram_.Find(s.id);
    // Newest: no child holds a state or counts one below it (CheckInvariants checks counts).
    bool below = false;
    for (const auto& [token, child] : node->children) below = below || !child->states.empty() || child->n_states_below > 0;
    if (e == nullptr) {
      err += id + " missing from the eviction order; ";
    } else if (e->depth != node->depth || e->bytes != static_cast<int64_t>(s.bytes) || e->last_used != s.last_used ||
               e->newest == below || e->held != node->held) {
      err += id + " out of date in the eviction order; ";
    }
  });
  if (n_ram != ram_.size()) err += "the eviction order holds states the tree does not; ";
  if (n_disk != disk_.size()) err += "the disk-key map holds states the tree does not; ";
  return err;
}

}  // namespace hearth::cache
