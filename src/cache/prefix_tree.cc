#include "cache/prefix_tree.h"

#include <algorithm>

namespace hearth::cache {

namespace {

// The states on `node` and below it; checks invariant 4 on the way.
size_t CountStates(const PrefixTree::Node* node, std::string& err) {
  size_t below = 0;
  for (const auto& [tok, child] : node->children) below += CountStates(child.get(), err);
  if (below != node->n_states_below) {
    err += "node at depth " + std::to_string(node->depth) + " counts " + std::to_string(node->n_states_below) +
           " states below it, holds " + std::to_string(below) + "; ";
  }
  return below + node->states.size();
}

}  // namespace

const char* StateKindName(StateKind kind) {
  switch (kind) {
    case StateKind::kDevice: return "device";
    case StateKind::kFull: return "full";
    case StateKind::kPartial: return "partial";
    case StateKind::kSuffix: return "suffix";
  }
  return "?";
}

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kDevice: return "device";
    case Tier::kRam: return "ram";
    case Tier::kDisk: return "disk";
    case Tier::kShared: return "shared";
  }
  return "?";
}

PrefixTree::Node* PrefixTree::Root(const std::string& ns) {
  auto& root = roots_[ns];
  if (!root) {
    root = std::make_unique<Node>();
    root->ns = ns;
  }
  return root.get();
}

PrefixTree::Match PrefixTree::MatchPrefix(const std::string& ns, std::span<const Token> tokens) {
  Match m;
  auto it = roots_.find(ns);
  if (it == roots_.end()) return m;
  Node* node = it->second.get();
  m.path.push_back(node);
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto child = node->children.find(tokens[pos]);
    if (child == node->children.end()) break;
    Node* next = child->second.get();
    size_t k = 0;
    while (k < next->edge.size() && pos + k < tokens.size() && next->edge[k] == tokens[pos + k]) ++k;
    if (k < next->edge.size()) {
      m.below = next;
      pos += k;
      break;
    }
    pos += k;
    node = next;
    m.path.push_back(node);
  }
  m.n_matched = pos;
  return m;
}

PrefixTree::Node* PrefixTree::Insert(const std::string& ns, std::span<const Token> tokens) {
  Node* node = Root(ns);
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto child = node->children.find(tokens[pos]);
    if (child == node->children.end()) {
      auto fresh = std::make_unique<Node>();
      fresh->parent = node;
      fresh->edge.assign(tokens.begin() + static_cast<std::ptrdiff_t>(pos), tokens.end());
      fresh->depth = static_cast<int>(tokens.size());
      Node* raw = fresh.get();
      node->children.emplace(tokens[pos], std::move(fresh));
      ++n_nodes_;
      return raw;
    }
    Node* next = child->second.get();
    size_t k = 0;
    while (k < next->edge.size() && pos + k < tokens.size() && next->edge[k] == tokens[pos + k]) ++k;
    if (k == next->edge.size()) {
      pos += k;
      node = next;
      continue;
    }
    // Split `next` after k tokens: node -> mid -> next.
    auto mid = std::make_unique<Node>();
    mid->parent = node;
    mid->edge.assign(next->edge.begin(), next->edge.begin() + static_cast<std::ptrdiff_t>(k));
    mid->depth = node->depth + static_cast<int>(k);
    std::unique_ptr<Node> lower = std::move(child->second);
    mid->n_states_below = lower->n_states_below + lower->states.size();
    lower->edge.erase(lower->edge.begin(), lower->edge.begin() + static_cast<std::ptrdiff_t>(k));
    lower->parent = mid.get();
    const Token lower_first = lower->edge.front();
    mid->children.emplace(lower_first, std::move(lower));
    Node* mid_raw = mid.get();
    child->second = std::move(mid);
    ++n_nodes_;
    node = mid_raw;
    pos += k;
  }
  return node;
}

uint64_t PrefixTree::AddState(Node* node, State state) {
  state.id = next_id_++;
  if (state.last_used == 0) state.last_used = Tick();
  node->states.push_back(state);
  index_[state.id] = node;
  CountBelow(node, /*added=*/true);
  if (observer_) observer_->StateAdded(node, state);
  return state.id;
}

void PrefixTree::CountBelow(Node* node, bool added) {
  for (Node* n = node->parent; n != nullptr; n = n->parent) {
    n->n_states_below = added ? n->n_states_below + 1 : n->n_states_below - 1;
    if (observer_ && n->n_states_below == (added ? 1u : 0u)) observer_->BelowChanged(n);
  }
}

void PrefixTree::Touch(uint64_t id) {
  Node* node = nullptr;
  State* s = FindState(id, &node);
  if (s == nullptr) return;
  s->last_used = Tick();
  if (observer_) observer_->StateUsed(node, *s);
}

State* PrefixTree::FindState(uint64_t id, Node** node_out) {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  Node* node = it->second;
  if (node_out) *node_out = node;
  for (auto& s : node->states) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

bool PrefixTree::RemoveState(uint64_t id) {
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  Node* node = it->second;
  index_.erase(it);
  auto s = std::find_if(node->states.begin(), node->states.end(), [id](const State& x) { return x.id == id; });
  const State gone = *s;
  node->states.erase(s);
  CountBelow(node, /*added=*/false);
  if (observer_) observer_->StateRemoved(node, gone);
  Prune(node);
  return true;
}

void PrefixTree::UnpinNode(Node* node) {
  --node->pins;
  Prune(node);
}

void PrefixTree::SetHeld(Node* node, bool held) {
  if (node->held == held) return;
  node->held = held;
  if (observer_) observer_->HeldChanged(node);
}

PrefixTree::PruneScope::~PruneScope() {
  if (--tree_.defer_depth_ > 0) return;
  while (!tree_.prune_pending_.empty()) {
    Node* node = *tree_.prune_pending_.begin();
    tree_.prune_pending_.erase(tree_.prune_pending_.begin());
    tree_.PruneNow(node);
  }
}

void PrefixTree::Prune(Node* node) {
  if (defer_depth_ > 0) {
    prune_pending_.insert(node);
    return;
  }
  PruneNow(node);
}

// Removes `node` if it holds nothing and has no children; merges it into its only child
// when it holds nothing and has one; frees a root left empty. Walks up as parents become
// useless. Each step frees exactly one node, which leaves prune_pending_ with it.
void PrefixTree::PruneNow(Node* node) {
  while (node && node->states.empty() && node->pins == 0) {
    if (node->parent == nullptr) {
      if (node->children.empty()) {
        prune_pending_.erase(node);
        const std::string ns = node->ns;
        roots_.erase(ns);  // destroys node
      }
      return;
    }
    if (node->children.size() > 1) return;
    Node* parent = node->parent;
    const Token key = node->edge.front();
    auto& slot = parent->children.at(key);
    prune_pending_.erase(node);
    if (node->children.empty()) {
      parent->children.erase(key);  // destroys node
    } else {
      std::unique_ptr<Node> only = std::move(node->children.begin()->second);
      only->edge.insert(only->edge.begin(), node->edge.begin(), node->edge.end());
      only->parent = parent;
      slot = std::move(only);  // destroys node
    }
    --n_nodes_;
    node = parent;
  }
}

const std::string& PrefixTree::NamespaceOf(const Node* node) const {
  static const std::string kNone;
  while (node && node->parent) node = node->parent;
  return node ? node->ns : kNone;
}

std::vector<Token> PrefixTree::PathTokens(const Node* node) const {
  std::vector<const Node*> chain;
  for (const Node* n = node; n && n->parent; n = n->parent) chain.push_back(n);
  std::vector<Token> out;
  out.reserve(static_cast<size_t>(node ? node->depth : 0));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) out.insert(out.end(), (*it)->edge.begin(), (*it)->edge.end());
  return out;
}

void PrefixTree::Visit(Node* node, const std::function<void(Node*)>& fn) const {
  fn(node);
  for (auto& [tok, child] : node->children) Visit(child.get(), fn);
}

void PrefixTree::ForEachState(const std::function<void(const Node*, const State&)>& fn) const {
  for (const auto& [ns, root] : roots_) {
    Visit(root.get(), [&](const Node* n) {
      for (const auto& s : n->states) fn(n, s);
    });
  }
}

void PrefixTree::ForEachLeaf(const std::function<void(const Node*)>& fn) const {
  for (const auto& [ns, root] : roots_) {
    Visit(root.get(), [&](const Node* n) {
      if (n->parent != nullptr && n->children.empty()) fn(n);
    });
  }
}

void PrefixTree::ForEachNode(const std::function<void(const Node*)>& fn) const {
  for (const auto& [ns, root] : roots_) Visit(root.get(), [&](const Node* n) { fn(n); });
}

std::string PrefixTree::CheckInvariants() const {
  std::string err;
  size_t nodes = 0, states = 0;
  for (const auto& [ns, root] : roots_) {
    if (!root->edge.empty() || root->depth != 0) err += "root of '" + ns + "' has an edge; ";
    if (root->children.empty() && root->states.empty() && root->pins == 0) err += "empty root '" + ns + "'; ";
    Visit(root.get(), [&](Node* n) {
      states += n->states.size();
      for (const auto& s : n->states) {
        auto it = index_.find(s.id);
        if (it == index_.end() || it->second != n) err += "state " + std::to_string(s.id) + " not indexed at its node; ";
      }
      if (n->parent == nullptr) return;
      ++nodes;
      if (n->edge.empty()) err += "empty edge below the root; ";
      if (n->depth != n->parent->depth + static_cast<int>(n->edge.size())) err += "depth mismatch; ";
      auto it = n->parent->children.find(n->edge.empty() ? -1 : n->edge.front());
      if (it == n->parent->children.end() || it->second.get() != n) err += "child not keyed by its first token; ";
      if (n->states.empty() && n->pins == 0 && n->children.size() < 2) err += "useless node at depth " + std::to_string(n->depth) + "; ";
    });
  }
  for (const auto& [ns, root] : roots_) CountStates(root.get(), err);
  if (nodes != n_nodes_) err += "node count " + std::to_string(n_nodes_) + " != " + std::to_string(nodes) + "; ";
  if (states != index_.size()) err += "state index size mismatch; ";
  if (defer_depth_ == 0 && !prune_pending_.empty()) err += "nodes left to prune outside a PruneScope; ";
  return err;
}

}  // namespace hearth::cache
