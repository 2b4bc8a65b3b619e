// PrefixCache's holds (prefix_cache.h, "Hold"): positions whose RAM states go after every
// state that is not held, for a while and within a budget.
#include <algorithm>
#include <vector>

#include "cache/prefix_cache.h"

namespace hearth::cache {

size_t PrefixCache::RamBytesAt(const PrefixTree::Node* node) {
  size_t bytes = 0;
  for (const State& s : node->states) bytes += s.tier == Tier::kRam ? s.bytes : 0;
  return bytes;
}

std::optional<int32_t> PrefixCache::Hold(const std::string& ns, std::span<const Token> tokens, const HoldSpec& spec) {
  PrefixTree::PruneScope scope(tree_);
  auto m = tree_.MatchPrefix(ns, tokens);
  PrefixTree::Node* node = nullptr;
  for (auto it = m.path.rbegin(); it != m.path.rend() && node == nullptr; ++it) {
    if ((*it)->depth > 0 && !(*it)->states.empty()) node = *it;
  }
  if (node == nullptr) return std::nullopt;
  const TimePoint now = Now();
  if (spec.newest) {
    // Older turns of this conversation: newest holds above it on its path, and those of
    // its key.
    std::vector<PrefixTree::Node*> older;
    for (PrefixTree::Node* n = node->parent; n != nullptr; n = n->parent) {
      auto it = holds_.find(n);
      if (it != holds_.end() && it->second.newest) older.push_back(n);
    }
    if (!spec.conversation.empty()) {
      for (const auto& [n, h] : holds_) {
        if (n != node && h.newest && h.conversation == spec.conversation && tree_.NamespaceOf(n) == ns) older.push_back(n);
      }
    }
    std::sort(older.begin(), older.end());
    older.erase(std::unique(older.begin(), older.end()), older.end());
    for (PrefixTree::Node* n : older) Unhold(n);
  }
  auto [it, added] = holds_.try_emplace(node);
  HoldEntry& h = it->second;
  if (added) {
    tree_.PinNode(node);
    tree_.SetHeld(node, true);
    h.until = now + spec.duration;
  } else {
    h.until = std::max(h.until, now + spec.duration);
  }
  h.since = ++hold_clock_;
  h.newest = h.newest || spec.newest;
  if (!spec.conversation.empty()) h.conversation = spec.conversation;
  EnforceHolds();
  return node->depth;
}

void PrefixCache::Unhold(PrefixTree::Node* node) {
  auto it = holds_.find(node);
  if (it == holds_.end()) return;
  holds_.erase(it);
  tree_.SetHeld(node, false);
  tree_.UnpinNode(node);
}

bool PrefixCache::UnholdLeastRecent() {
  if (holds_.empty()) return false;
  auto oldest = std::min_element(holds_.begin(), holds_.end(),
                                 [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
  Unhold(oldest->first);
  ++holds_released_;
  return true;
}

void PrefixCache::EnforceHolds() {
  const TimePoint now = Now();
  std::vector<PrefixTree::Node*> expired;
  size_t held = 0;
  for (const auto& [node, h] : holds_) {
    if (h.until <= now) {
      expired.push_back(node);
    } else {
      held += RamBytesAt(node);
    }
  }
  for (PrefixTree::Node* node : expired) Unhold(node);
  if (held <= config_.pin_budget_bytes) return;
  std::vector<std::pair<int64_t, PrefixTree::Node*>> by_age;
  for (const auto& [node, h] : holds_) by_age.emplace_back(h.since, node);
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [since, node] : by_age) {
    if (held <= config_.pin_budget_bytes) break;
    held -= RamBytesAt(node);
    Unhold(node);
    ++holds_released_;
  }
}

}  // namespace hearth::cache
