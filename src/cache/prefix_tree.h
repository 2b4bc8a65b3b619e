// PrefixTree: a radix tree over the token sequences of every conversation the server has
// seen, recording which saved states exist at which positions.
//
// The tree knows tokens, nodes and states, never requests. A node sits at one position
// (its depth) of one token sequence; a state hangs on the node at exactly the position it
// describes:
//   - kDevice:  a context sequence whose tokens are exactly the path to the node (its
//               recurrent state is at the node; its attention KV covers every ancestor);
//   - kFull:    serialized full state (all layers) at the node;
//   - kPartial: serialized recurrent / sliding-window state only, at the node; usable
//               together with attention KV from any device sequence or full state below.
// Every stored state is a node of the tree and so reachable by some token sequence:
// nothing unmatchable can be admitted (invariant 3).
//
// Namespaces (model fingerprint, context settings, cache salt) are separate roots and
// never share nodes; a root left with nothing below it is freed like any useless node.
//
// Node lifetime: removing a state or a pin prunes the nodes it leaves useless (a leaf is
// freed, a stateless node with one child merges into it), which frees `Node`s. Inside a
// PruneScope nothing is freed: removals only mark their nodes, and the outermost scope's
// end prunes whatever is useless then. So every `Node*` taken inside a scope (a Match's
// path, a candidate list) stays valid until the scope ends. Insert never frees a node
// (it splits edges by adding nodes above existing ones).
//
// Views of the states kept elsewhere (the cache's eviction order) follow the tree through
// its Observer: a state's tier, bytes and node never change once added (a move to
// another tier is a new state), and its last_used changes only through Touch.
//
// Thread safety: none; owned by the engine loop thread.
//
// Invariants (CheckInvariants verifies them):
//  1. A node's depth == parent depth + edge length; children's edges start with distinct
//     tokens; only roots have empty edges.
//  2. A non-root node has a state, or at least two children (no useless chain nodes),
//     or is pinned.
//  3. Every state hangs on exactly one node, at the position it describes.
//  4. A node's n_states_below is the number of states on the nodes below it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace hearth::cache {

using Token = int32_t;

// kSuffix: a whole state without the attention KV of its first suffix_from positions,
// which a device sequence through them supplies when it is restored (RAM only; with a
// kPartial at the same node for its recurrent part: see PrefixCache::EvictDevice).
enum class StateKind { kDevice, kFull, kPartial, kSuffix };
// kShared: a resume that read its state from the shared tier (shared_store.h) just now.
// No state in the tree has it: what the shared tier gives becomes a RAM state.
enum class Tier { kDevice, kRam, kDisk, kShared };

const char* StateKindName(StateKind kind);
const char* TierName(Tier tier);

struct State {
  uint64_t id = 0;     // unique per tree
  StateKind kind = StateKind::kPartial;
  Tier tier = Tier::kRam;
  int32_t seq = -1;    // kDevice only: the context sequence
  size_t bytes = 0;    // size in its tier
  uint64_t disk_key = 0;   // kDisk only: the DiskStore entry
  int64_t last_used = 0;   // logical clock
  // kDevice: where the part of its tokens not worth a copy of its own begins (0: none).
  // See PrefixCache::Adopt.
  int32_t tail_start = 0;
  int32_t suffix_from = 0;  // kSuffix only: where its attention KV begins
};

class PrefixTree {
 public:
  struct Node {
    Node* parent = nullptr;
    std::vector<Token> edge;  // tokens from parent to here
    int depth = 0;
    std::unordered_map<Token, std::unique_ptr<Node>> children;  // by first edge token
    std::vector<State> states;
    int pins = 0;  // nodes pinned stay even without states (e.g. a request's resume point)
    bool held = false;  // its RAM states go last (the cache's pins, see prefix_cache.h)
    size_t n_states_below = 0;  // states on the nodes below this one (invariant 4)
    std::string ns;  // roots only: the namespace
  };

  PrefixTree() = default;
  PrefixTree(const PrefixTree&) = delete;
  PrefixTree& operator=(const PrefixTree&) = delete;

  // Told of each change to the tree's states, right after it, by the tree's calls that
  // make it. Observers must not change the tree from these calls.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void StateAdded(const Node* node, const State& s) = 0;
    virtual void StateRemoved(const Node* node, const State& s) = 0;
    // Touch changed s.last_used.
    virtual void StateUsed(const Node* node, const State& s) = 0;
    // HasStateBelow(node) changed.
    virtual void BelowChanged(const Node* node) = 0;
    // node->held changed.
    virtual void HeldChanged(const Node* node) = 0;
  };
  // At most one; nullptr for none. REQUIRES: it outlives the tree or is unset first.
  void SetObserver(Observer* observer) { observer_ = observer; }

  // The deepest position of `tokens` that the tree holds in namespace `ns`, and the nodes
  // on the way (root first). A match ending inside an edge reports the edge's lower node
  // in `below` with `n_matched` < below->depth.
  struct Match {
    size_t n_matched = 0;
    std::vector<Node*> path;  // nodes with depth <= n_matched, root first
    Node* below = nullptr;    // the node whose edge the match ended in, if any
  };
  Match MatchPrefix(const std::string& ns, std::span<const Token> tokens);

  // The node at exactly `tokens` in `ns`, created (splitting an edge) if needed.
  // REQUIRES: the caller adds a state to it or pins it right away (else PruneIfUseless).
  Node* Insert(const std::string& ns, std::span<const Token> tokens);
  // Removes `node` (and useless ancestors) if it holds no state, pin or fork; inside a
  // PruneScope, at the scope's end.
  void PruneIfUseless(Node* node) { Prune(node); }

  // While one is alive, no node is freed (see "Node lifetime" above). Scopes nest; the
  // outermost one prunes at its end. REQUIRES: the tree outlives the scope.
  class PruneScope {
   public:
    explicit PruneScope(PrefixTree& tree) : tree_(tree) { ++tree_.defer_depth_; }
    ~PruneScope();
    PruneScope(const PruneScope&) = delete;
    PruneScope& operator=(const PruneScope&) = delete;

   private:
    PrefixTree& tree_;
  };

  // Adds a state to `node`; returns its id.
  uint64_t AddState(Node* node, State state);
  // Finds a state by id; nullptr when gone. REQUIRES: the caller changes no field that
  // observers follow (see above) but through the tree's calls.
  State* FindState(uint64_t id, Node** node_out = nullptr);
  // Sets a state's last_used to a new Tick(). No-op when gone.
  void Touch(uint64_t id);
  // Removes a state and prunes nodes left useless (at the end of a PruneScope, inside
  // one). Returns false when not found.
  bool RemoveState(uint64_t id);

  // The namespace `node` belongs to.
  const std::string& NamespaceOf(const Node* node) const;
  // The tokens from the root to `node`.
  std::vector<Token> PathTokens(const Node* node) const;

  // Whether any node below `node` holds a state (false: a state on `node` is the newest
  // of its conversation). O(1).
  static bool HasStateBelow(const Node* node) { return node->n_states_below > 0; }

  // Visits every state (for write-behind and checks: O(nodes)).
  void ForEachState(const std::function<void(const Node*, const State&)>& fn) const;
  // Visits every node without children below a root: where a conversation's tokens end.
  void ForEachLeaf(const std::function<void(const Node*)>& fn) const;
  // Visits every node, each root before the nodes below it, a parent before its children.
  void ForEachNode(const std::function<void(const Node*)>& fn) const;

  // Node pins keep otherwise useless nodes alive.
  void PinNode(Node* node) { ++node->pins; }
  void UnpinNode(Node* node);
  // Marks `node`'s states as held (or no longer), telling the observer. The tree itself
  // gives held nodes no other meaning: the caller pins a node it holds to keep it.
  void SetHeld(Node* node, bool held);

  size_t n_nodes() const { return n_nodes_; }
  size_t n_roots() const { return roots_.size(); }
  size_t n_states() const { return index_.size(); }
  int64_t Tick() { return ++clock_; }

  // Empty string when the invariants hold, else what is wrong.
  std::string CheckInvariants() const;

 private:
  Node* Root(const std::string& ns);
  // Prunes now, or marks `node` for the end of the open PruneScope.
  void Prune(Node* node);
  void PruneNow(Node* node);
  void Visit(Node* node, const std::function<void(Node*)>& fn) const;
  // Counts a state added at (or removed from) `node` in n_states_below of the nodes above
  // it, telling the observer of those whose HasStateBelow changed.
  void CountBelow(Node* node, bool added);

  std::map<std::string, std::unique_ptr<Node>> roots_;
  std::unordered_map<uint64_t, Node*> index_;  // state id -> node
  uint64_t next_id_ = 1;
  size_t n_nodes_ = 0;
  int64_t clock_ = 0;
  int defer_depth_ = 0;                     // open PruneScopes
  std::unordered_set<Node*> prune_pending_;  // nodes to prune when the last scope ends
  Observer* observer_ = nullptr;
};

}  // namespace hearth::cache
