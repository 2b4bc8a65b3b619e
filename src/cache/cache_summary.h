// CacheSummary: what the prefix cache holds, as a bounded copy for GET /v1/cache and the
// web page: the tree of shared prefixes (nodes with their depth, children and states),
// the conversations (the tree's leaves), and per namespace what it holds in each tier.
//
// No tokens and no text: positions, counts, kinds, tiers and bytes only. Each entry keeps
// its namespace's string so that VisibleTo can select a client's own; what is shown of a
// namespace is its hash (a namespace may name a tenant).
//
// Thread safety: SummarizeCache reads the cache, so it runs on the thread that owns the
// cache (the engine loop). A CacheSummary is a plain value: once made, any thread may read
// or copy it, and VisibleTo is a pure function.
//
// Invariants of a summary made by SummarizeCache (VisibleTo keeps them):
//  1. Every node's parent is listed before it; roots (depth 0, one per namespace) have
//     none. So the nodes form a forest whose every path starts at a root.
//  2. At most limits.max_nodes nodes, limits.max_conversations conversations and
//     limits.max_states_per_conversation states per conversation. The nodes are the paths
//     of the most recently used conversations, whole, in that order, until the next path
//     no longer fits (when the first does not, its part nearest the root);
//     nodes_truncated says whether any node was left out.
//  3. `namespaces` counts everything the cache holds, listed or not; n_conversations is
//     the sum of their conversations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/shared_store.h"

namespace hearth::cache {

struct SummaryLimits {
  size_t max_conversations = 64;
  size_t max_nodes = 256;
  size_t max_states_per_conversation = 32;
};

struct CacheSummary {
  struct StateInfo {
    int32_t position = 0;
    StateKind kind = StateKind::kPartial;
    Tier tier = Tier::kRam;
    size_t bytes = 0;
  };
  // One per leaf of the tree: a token sequence that no other extends.
  struct Conversation {
    std::string ns;                  // for VisibleTo; show ns_id
    uint64_t ns_id = 0;              // XXH3-64 of the namespace
    int32_t n_tokens = 0;
    int32_t n_shared = 0;            // of those, shared with another conversation
    int64_t last_used = 0;           // logical clock: larger is more recent
    std::vector<StateInfo> states;   // on its path, ascending; the deepest ones
  };
  // A node of the tree of shared prefixes: where a state is, or where conversations part.
  struct Node {
    int32_t id = 0;                  // unique within this summary
    std::optional<int32_t> parent;   // none for a namespace's root
    std::string ns;                  // for VisibleTo; show ns_id
    uint64_t ns_id = 0;
    int32_t depth = 0;               // tokens from the root
    size_t n_children = 0;           // in the cache, listed or not
    int64_t last_used = 0;           // of its own states; 0 without states
    std::vector<StateInfo> states;   // at position `depth`
  };
  struct Namespace {
    std::string ns;                  // for VisibleTo; show ns_id
    uint64_t ns_id = 0;
    size_t n_conversations = 0, n_nodes = 0, n_states = 0;  // nodes: the root not counted
    size_t bytes_device = 0, bytes_ram = 0, bytes_disk = 0;  // device states count 0 bytes: they are KV cells
    size_t tokens_device = 0;        // positions its cached device sequences hold
  };

  CacheStats stats;                          // the whole cache's, whatever VisibleTo kept
  size_t ram_budget_bytes = 0, disk_budget_bytes = 0;
  size_t device_sequences = 0;               // the device tier's room: sequences the cache may hold
  std::string disk_unavailable;              // set by the owner: why the disk tier asked for is off
  std::optional<SharedStats> shared;         // set by the owner: the shared tier's, when there is one
  std::vector<Namespace> namespaces;
  size_t n_conversations = 0;                // all of them, listed or not
  std::vector<Conversation> conversations;   // the most recently used first
  std::vector<Node> nodes;                   // invariant 1
  bool nodes_truncated = false;
};

// The cache summarized within `limits`. O(nodes in the cache). REQUIRES: called on the
// thread that owns `cache`.
CacheSummary SummarizeCache(const PrefixCache& cache, const SummaryLimits& limits = {});

// `summary` with only the namespaces, conversations and nodes for which `visible(ns)` is
// true; n_conversations recounted from those namespaces. The counters and tier totals
// (stats, budgets) stay the whole cache's.
CacheSummary VisibleTo(const CacheSummary& summary, const std::function<bool(const std::string& ns)>& visible);

}  // namespace hearth::cache
