// EvictionOrder: the RAM tier's states in the order PrefixCache evicts them, so that
// choosing the next victim costs O(log^2 n) amortized instead of a pass over the tree.
//
// The order, lowest (first to go) first:
//   1. states that are not the newest of their conversation (some state lies below
//      theirs) before those that are, and both before held ones (PrefixCache's pins:
//      a live conversation's newest state, a client's cache breakpoint);
//   2. lower value = depth / max(bytes, 1) / (1 + now - last_used): tokens of recompute a
//      state saves per byte, discounted by how long ago it was used;
//   3. lower id.
// Values depend on the clock `now`, and two states' order can swap as it advances. It
// swaps once at most: comparing two values is comparing two linear functions of `now`
// (cross-multiplied, exactly, in 128-bit integers). So the order is kept as a kinetic
// tournament: a binary tree over entry slots whose every node holds the lowest entry of
// its subtree at the current time and the first time that could change (its "melt"
// time). Lowest(now) advances the time and replays only the nodes that melted; an entry
// that comes, goes or changes replays the nodes above it.
//
// Thread safety: none; owned by the engine loop thread, like the tree it mirrors.
//
// Invariants (CheckInvariants verifies them):
//  1. Every node's winner is the lowest entry below it at now(); its melt time is later
//     than now() and no later than the first time any node below it changes winner.
//  2. now() >= the last_used of every entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace hearth::cache {

class EvictionOrder {
 public:
  struct Entry {
    uint64_t id = 0;
    int64_t depth = 0;      // tokens the state saves recomputing
    int64_t bytes = 0;      // its size in RAM
    int64_t last_used = 0;  // logical clock
    bool newest = false;    // nothing stored below it: the newest of its conversation
    bool held = false;      // pinned by the cache: goes after every state that is not
  };

  // REQUIRES: `e.id` is not present; depth >= 0, bytes >= 0.
  void Insert(const Entry& e);
  // No-op when `id` is absent.
  void Erase(uint64_t id);
  void SetLastUsed(uint64_t id, int64_t last_used);
  void SetNewest(uint64_t id, bool newest);
  void SetHeld(uint64_t id, bool held);

  // The lowest entry at time `now`; nullopt when empty. A `now` earlier than now() counts
  // as now() (the clock never goes back).
  std::optional<Entry> Lowest(int64_t now);

  const Entry* Find(uint64_t id) const;
  size_t size() const { return slot_of_.size(); }
  int64_t now() const { return now_; }

  // Empty string when the invariants hold, else what is wrong.
  std::string CheckInvariants() const;

  // Whether `a` goes before `b` at time `now` (the order above). REQUIRES: now >= both
  // last_used. For tests.
  static bool Before(const Entry& a, const Entry& b, int64_t now);

 private:
  static constexpr int64_t kNever = INT64_MAX;
  static constexpr int kNone = -1;
  struct Node {
    int winner = kNone;  // slot
    int64_t melt = kNever;
  };

  // Moves the time to `now`, replaying the nodes that melted by then.
  void Advance(int64_t now);
  void Replay(size_t node);
  // Recomputes one node from its children at now_.
  void Combine(size_t node);
  // Recomputes the nodes above slot `slot`.
  void Update(int slot);
  // The first time after now_ at which slot `loser` goes before slot `winner`.
  int64_t SwapTime(int winner, int loser) const;
  void Grow();

  std::vector<Entry> slots_;
  std::vector<bool> used_;
  std::vector<int> free_;
  std::unordered_map<uint64_t, int> slot_of_;
  std::vector<Node> nodes_;  // nodes_[1] is the root; leaves at [capacity, 2 * capacity)
  size_t capacity_ = 0;      // slots, a power of two
  int64_t now_ = 0;
};

}  // namespace hearth::cache
