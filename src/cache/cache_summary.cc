#include "cache/cache_summary.h"

#include <xxhash.h>

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hearth::cache {
namespace {

using TreeNode = PrefixTree::Node;

uint64_t HashOf(const std::string& ns) { return XXH3_64bits(ns.data(), ns.size()); }

CacheSummary::StateInfo InfoOf(const TreeNode* node, const State& s) { return {node->depth, s.kind, s.tier, s.bytes}; }

// Per namespace: a root is visited before every node below it (ForEachNode), so the
// entry being filled is the last one opened.
std::vector<CacheSummary::Namespace> CountNamespaces(const PrefixTree& tree) {
  std::vector<CacheSummary::Namespace> out;
  tree.ForEachNode([&](const TreeNode* n) {
    if (n->parent == nullptr) {
      out.push_back({.ns = n->ns, .ns_id = HashOf(n->ns)});
      return;
    }
    CacheSummary::Namespace& e = out.back();
    ++e.n_nodes;
    if (n->children.empty()) ++e.n_conversations;
    for (const State& s : n->states) {
      ++e.n_states;
      size_t& bytes = s.tier == Tier::kDevice ? e.bytes_device : s.tier == Tier::kRam ? e.bytes_ram : e.bytes_disk;
      bytes += s.bytes;
      if (s.kind == StateKind::kDevice) e.tokens_device += static_cast<size_t>(n->depth);
    }
  });
  return out;
}

// The conversation ending at `leaf`.
CacheSummary::Conversation ConversationOf(const PrefixTree& tree, const TreeNode* leaf, size_t max_states) {
  CacheSummary::Conversation c;
  c.ns = tree.NamespaceOf(leaf);
  c.ns_id = HashOf(c.ns);
  c.n_tokens = leaf->depth;
  for (const TreeNode* n = leaf; n != nullptr; n = n->parent) {
    if (n != leaf && n->children.size() > 1 && c.n_shared == 0) c.n_shared = n->depth;
    for (const State& s : n->states) {
      c.last_used = std::max(c.last_used, s.last_used);
      if (c.states.size() < max_states) c.states.push_back(InfoOf(n, s));
    }
  }
  std::reverse(c.states.begin(), c.states.end());
  return c;
}

// The paths of `leaves` (the most recently used first), root first, within max_nodes.
void AddPaths(const std::vector<const TreeNode*>& leaves, size_t max_nodes, CacheSummary& out) {
  std::unordered_map<const TreeNode*, int32_t> ids;
  for (const TreeNode* leaf : leaves) {
    std::vector<const TreeNode*> missing;  // leaf first
    for (const TreeNode* n = leaf; n != nullptr && !ids.contains(n); n = n->parent) missing.push_back(n);
    if (out.nodes.size() + missing.size() > max_nodes) {
      out.nodes_truncated = true;
      if (!out.nodes.empty()) return;  // whole paths only, after the first
    }
    for (auto it = missing.rbegin(); it != missing.rend() && out.nodes.size() < max_nodes; ++it) {
      const TreeNode* n = *it;
      CacheSummary::Node node;
      node.id = static_cast<int32_t>(out.nodes.size());
      if (n->parent != nullptr) node.parent = ids.at(n->parent);
      node.ns = n->parent == nullptr ? n->ns : out.nodes[static_cast<size_t>(*node.parent)].ns;
      node.ns_id = HashOf(node.ns);
      node.depth = n->depth;
      node.n_children = n->children.size();
      for (const State& s : n->states) {
        node.last_used = std::max(node.last_used, s.last_used);
        node.states.push_back(InfoOf(n, s));
      }
      ids.emplace(n, node.id);
      out.nodes.push_back(std::move(node));
    }
    if (out.nodes_truncated) return;
  }
}

}  // namespace

CacheSummary SummarizeCache(const PrefixCache& cache, const SummaryLimits& limits) {
  const PrefixTree& tree = cache.tree();
  CacheSummary out;
  out.stats = cache.stats();
  out.ram_budget_bytes = cache.ram_budget();
  out.disk_budget_bytes = cache.disk_budget();
  out.device_sequences = cache.n_sequences();
  out.namespaces = CountNamespaces(tree);
  for (const auto& e : out.namespaces) out.n_conversations += e.n_conversations;

  // Leaves by when their conversation was last used, newest first; only the listed ones
  // are summarized in full.
  std::vector<std::pair<int64_t, const TreeNode*>> leaves;
  tree.ForEachLeaf([&](const TreeNode* leaf) {
    int64_t last_used = 0;
    for (const TreeNode* n = leaf; n != nullptr; n = n->parent) {
      for (const State& s : n->states) last_used = std::max(last_used, s.last_used);
    }
    leaves.emplace_back(last_used, leaf);
  });
  std::stable_sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const TreeNode*> newest_first;
  for (const auto& [last_used, leaf] : leaves) {
    newest_first.push_back(leaf);
    if (out.conversations.size() < limits.max_conversations) {
      out.conversations.push_back(ConversationOf(tree, leaf, limits.max_states_per_conversation));
    }
  }
  AddPaths(newest_first, limits.max_nodes, out);
  return out;
}

CacheSummary VisibleTo(const CacheSummary& summary, const std::function<bool(const std::string& ns)>& visible) {
  CacheSummary out;
  out.stats = summary.stats;
  out.ram_budget_bytes = summary.ram_budget_bytes;
  out.disk_budget_bytes = summary.disk_budget_bytes;
  out.device_sequences = summary.device_sequences;
  out.disk_unavailable = summary.disk_unavailable;
  out.shared = summary.shared;
  out.nodes_truncated = summary.nodes_truncated;
  for (const auto& e : summary.namespaces) {
    if (!visible(e.ns)) continue;
    out.namespaces.push_back(e);
    out.n_conversations += e.n_conversations;
  }
  for (const auto& c : summary.conversations) {
    if (visible(c.ns)) out.conversations.push_back(c);
  }
  for (const auto& n : summary.nodes) {
    if (visible(n.ns)) out.nodes.push_back(n);  // a node's parent shares its namespace
  }
  return out;
}

}  // namespace hearth::cache
