#include "cache/eviction_order.h"

#include <algorithm>

namespace hearth::cache {
namespace {

// Products of a depth, a size and a clock value: see the bounds in Insert's REQUIRES.
__extension__ typedef __int128 Wide;

// How `a` and `b` compare on value, scaled by both sizes (so that no division is needed):
// a's value is depth_a / (bytes_a * (1 + now - last_used_a)); a_scale = depth_a * bytes_b.
struct Scales {
  Wide a, b;
};
Scales ScalesOf(const EvictionOrder::Entry& a, const EvictionOrder::Entry& b) {
  const Wide bytes_a = std::max<int64_t>(a.bytes, 1), bytes_b = std::max<int64_t>(b.bytes, 1);
  return {static_cast<Wide>(a.depth) * bytes_b, static_cast<Wide>(b.depth) * bytes_a};
}

Wide FloorDiv(Wide n, Wide d) {  // d > 0
  Wide q = n / d;
  if (n % d != 0 && n < 0) --q;
  return q;
}

Wide CeilDiv(Wide n, Wide d) {  // d > 0
  Wide q = n / d;
  if (n % d != 0 && n > 0) ++q;
  return q;
}

// Rule 1 of the order: which class a state is in, lowest first.
int ClassOf(const EvictionOrder::Entry& e) { return e.held ? 2 : e.newest ? 1 : 0; }

}  // namespace

bool EvictionOrder::Before(const Entry& a, const Entry& b, int64_t now) {
  if (ClassOf(a) != ClassOf(b)) return ClassOf(a) < ClassOf(b);
  const Scales s = ScalesOf(a, b);
  // value_a < value_b  <=>  depth_a * bytes_b * age_b < depth_b * bytes_a * age_a, where
  // age = 1 + now - last_used >= 1.
  const Wide lhs = s.a * (static_cast<Wide>(now) + 1 - b.last_used);
  const Wide rhs = s.b * (static_cast<Wide>(now) + 1 - a.last_used);
  if (lhs != rhs) return lhs < rhs;
  return a.id < b.id;
}

// loser goes before winner at time x when g(x) = scale_l * age_w(x) - scale_w * age_l(x) < 0
// (or == 0, when its id is lower). g(x) = (scale_l - scale_w) * x + k: a line, so the order
// swaps once at most, and only when g decreases.
int64_t EvictionOrder::SwapTime(int winner, int loser) const {
  const Entry& w = slots_[static_cast<size_t>(winner)];
  const Entry& l = slots_[static_cast<size_t>(loser)];
  if (ClassOf(w) != ClassOf(l)) return kNever;
  const Scales s = ScalesOf(l, w);
  const Wide slope = s.a - s.b;
  if (slope >= 0) return kNever;
  const Wide k = s.a * (1 - static_cast<Wide>(w.last_used)) - s.b * (1 - static_cast<Wide>(l.last_used));
  // g(x) < 0 <=> x > k / -slope;  g(x) <= 0 <=> x >= k / -slope.
  const Wide at = l.id < w.id ? CeilDiv(k, -slope) : FloorDiv(k, -slope) + 1;
  if (at >= static_cast<Wide>(kNever)) return kNever;
  return std::max<int64_t>(static_cast<int64_t>(at), now_ + 1);
}

void EvictionOrder::Combine(size_t node) {
  const Node& left = nodes_[2 * node];
  const Node& right = nodes_[2 * node + 1];
  Node& out = nodes_[node];
  out.melt = std::min(left.melt, right.melt);
  if (left.winner == kNone || right.winner == kNone) {
    out.winner = left.winner == kNone ? right.winner : left.winner;
    return;
  }
  const bool left_first = Before(slots_[static_cast<size_t>(left.winner)], slots_[static_cast<size_t>(right.winner)], now_);
  out.winner = left_first ? left.winner : right.winner;
  out.melt = std::min(out.melt, SwapTime(out.winner, left_first ? right.winner : left.winner));
}

void EvictionOrder::Replay(size_t node) {
  if (node >= capacity_ || nodes_[node].melt > now_) return;
  Replay(2 * node);
  Replay(2 * node + 1);
  Combine(node);
}

void EvictionOrder::Advance(int64_t now) {
  if (now <= now_) return;
  now_ = now;
  if (capacity_ > 0) Replay(1);
}

void EvictionOrder::Update(int slot) {
  size_t node = capacity_ + static_cast<size_t>(slot);
  nodes_[node].winner = used_[static_cast<size_t>(slot)] ? slot : kNone;
  for (node /= 2; node >= 1; node /= 2) Combine(node);
}

void EvictionOrder::Grow() {
  const size_t old = capacity_;
  capacity_ = std::max<size_t>(64, 2 * capacity_);
  slots_.resize(capacity_);
  used_.resize(capacity_, false);
  for (size_t i = capacity_; i > old; --i) free_.push_back(static_cast<int>(i - 1));  // lowest slots first
  nodes_.assign(2 * capacity_, Node{});
  for (size_t i = 0; i < capacity_; ++i) nodes_[capacity_ + i].winner = used_[i] ? static_cast<int>(i) : kNone;
  for (size_t node = capacity_ - 1; node >= 1; --node) Combine(node);
}

void EvictionOrder::Insert(const Entry& e) {
  Advance(e.last_used);
  if (free_.empty()) Grow();
  const int slot = free_.back();
  free_.pop_back();
  slots_[static_cast<size_t>(slot)] = e;
  used_[static_cast<size_t>(slot)] = true;
  slot_of_[e.id] = slot;
  Update(slot);
}

void EvictionOrder::Erase(uint64_t id) {
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) return;
  const int slot = it->second;
  slot_of_.erase(it);
  used_[static_cast<size_t>(slot)] = false;
  free_.push_back(slot);
  Update(slot);
}

void EvictionOrder::SetLastUsed(uint64_t id, int64_t last_used) {
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) return;
  Advance(last_used);
  slots_[static_cast<size_t>(it->second)].last_used = last_used;
  Update(it->second);
}

void EvictionOrder::SetNewest(uint64_t id, bool newest) {
  auto it = slot_of_.find(id);
  if (it == slot_of_.end() || slots_[static_cast<size_t>(it->second)].newest == newest) return;
  slots_[static_cast<size_t>(it->second)].newest = newest;
  Update(it->second);
}

void EvictionOrder::SetHeld(uint64_t id, bool held) {
  auto it = slot_of_.find(id);
  if (it == slot_of_.end() || slots_[static_cast<size_t>(it->second)].held == held) return;
  slots_[static_cast<size_t>(it->second)].held = held;
  Update(it->second);
}

std::optional<EvictionOrder::Entry> EvictionOrder::Lowest(int64_t now) {
  Advance(now);
  if (capacity_ == 0 || nodes_[1].winner == kNone) return std::nullopt;
  return slots_[static_cast<size_t>(nodes_[1].winner)];
}

const EvictionOrder::Entry* EvictionOrder::Find(uint64_t id) const {
  auto it = slot_of_.find(id);
  return it == slot_of_.end() ? nullptr : &slots_[static_cast<size_t>(it->second)];
}

std::string EvictionOrder::CheckInvariants() const {
  std::string err;
  size_t n_used = 0;
  for (size_t i = 0; i < capacity_; ++i) {
    if (!used_[i]) continue;
    ++n_used;
    auto it = slot_of_.find(slots_[i].id);
    if (it == slot_of_.end() || it->second != static_cast<int>(i)) err += "slot " + std::to_string(i) + " not indexed; ";
    if (slots_[i].last_used > now_) err += "entry " + std::to_string(slots_[i].id) + " used after now; ";
  }
  if (n_used != slot_of_.size()) err += "slot count mismatch; ";
  if (n_used + free_.size() != capacity_) err += "free slots mismatch; ";
  for (size_t node = capacity_ - 1; node >= 1 && node < capacity_; --node) {
    // The lowest entry below `node`, by brute force.
    int best = kNone;
    size_t lo = node, hi = node + 1;
    while (lo < capacity_) lo *= 2, hi *= 2;
    for (size_t leaf = lo; leaf < hi; ++leaf) {
      const size_t i = leaf - capacity_;
      if (used_[i] && (best == kNone || Before(slots_[i], slots_[static_cast<size_t>(best)], now_))) best = static_cast<int>(i);
    }
    const Node& n = nodes_[node];
    if (n.winner != best) err += "node " + std::to_string(node) + " has the wrong winner; ";
    if (n.melt <= now_) err += "node " + std::to_string(node) + " melted unreplayed; ";
    if (n.melt > nodes_[2 * node].melt || n.melt > nodes_[2 * node + 1].melt) err += "node " + std::to_string(node) + " melts after a child; ";
  }
  return err;
}

}  // namespace hearth::cache
