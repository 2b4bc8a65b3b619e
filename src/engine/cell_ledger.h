// CellLedger: which attention KV cells a unified cache's sequences hold, kept beside
// llama.cpp's own bookkeeping (which has no public count of cells in use). A copied
// sequence shares its source's cells, so the sequences' lengths summed overstate what
// the cache holds: three sequences forked from one 40k-token conversation hold 40k cells,
// not 120k.
//
// Thread safety: none; owned by the Context that feeds it (the engine thread).
//
// Invariants:
//  1. Each (sequence, position) holds at most one cell; a cell is in use while at least
//     one (sequence, position) holds it, and n_used() counts exactly those cells.
//  2. Copy shares cells (no new ones); Append makes a new one; Remove releases.
//
// What it does not know: cells llama.cpp frees on its own. A sliding-window cache drops
// positions older than its window, and the ledger keeps them; for those models it counts
// the full-attention part's cells (which hold every position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hearth::engine {

class CellLedger {
 public:
  // A new cell at `pos` of `seq` (released first if the position held one).
  // REQUIRES: seq >= 0, pos >= 0.
  void Append(int32_t seq, int32_t pos);
  // Releases the positions [p0, p1) of `seq`; p1 < 0 means to its end.
  void Remove(int32_t seq, int32_t p0, int32_t p1);
  // `dst` holds `src`'s cells at [p0, p1) too (p1 < 0: to src's end), in addition to
  // what it holds elsewhere; a position dst held there is released first.
  void Copy(int32_t src, int32_t dst, int32_t p0, int32_t p1);

  // Cells in use by any sequence.
  int64_t n_used() const { return n_used_; }
  // Positions `seq` holds.
  int64_t n_held(int32_t seq) const;

 private:
  static constexpr int32_t kNone = -1;
  std::vector<int32_t>& Positions(int32_t seq);
  int32_t NewCell();
  void Hold(int32_t cell) { ++refs_[static_cast<size_t>(cell)]; }
  void Release(int32_t cell);

  std::vector<std::vector<int32_t>> cells_;  // [seq][pos]: the cell, or kNone
  std::vector<int32_t> refs_;                // [cell]: (sequence, position) pairs holding it
  std::vector<int32_t> free_;                // cells with no holder, to hand out again
  int64_t n_used_ = 0;
};

}  // namespace hearth::engine
