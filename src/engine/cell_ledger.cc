#include "engine/cell_ledger.h"

#include <algorithm>

namespace hearth::engine {

std::vector<int32_t>& CellLedger::Positions(int32_t seq) {
  if (static_cast<size_t>(seq) >= cells_.size()) cells_.resize(static_cast<size_t>(seq) + 1);
  return cells_[static_cast<size_t>(seq)];
}

int32_t CellLedger::NewCell() {
  int32_t cell;
  if (!free_.empty()) {
    cell = free_.back();
    free_.pop_back();
  } else {
    cell = static_cast<int32_t>(refs_.size());
    refs_.push_back(0);
  }
  ++n_used_;
  return cell;
}

void CellLedger::Release(int32_t cell) {
  if (--refs_[static_cast<size_t>(cell)] > 0) return;
  free_.push_back(cell);
  --n_used_;
}

void CellLedger::Append(int32_t seq, int32_t pos) {
  std::vector<int32_t>& held = Positions(seq);
  if (static_cast<size_t>(pos) >= held.size()) held.resize(static_cast<size_t>(pos) + 1, kNone);
  int32_t& at = held[static_cast<size_t>(pos)];
  if (at != kNone) Release(at);
  at = NewCell();
  Hold(at);
}

void CellLedger::Remove(int32_t seq, int32_t p0, int32_t p1) {
  if (seq < 0 || static_cast<size_t>(seq) >= cells_.size()) return;
  std::vector<int32_t>& held = cells_[static_cast<size_t>(seq)];
  const auto end = p1 < 0 ? held.size() : std::min(held.size(), static_cast<size_t>(p1));
  for (size_t p = static_cast<size_t>(std::max(0, p0)); p < end; ++p) {
    if (held[p] != kNone) Release(held[p]);
    held[p] = kNone;
  }
  while (!held.empty() && held.back() == kNone) held.pop_back();
}

void CellLedger::Copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  if (src == dst || src < 0 || static_cast<size_t>(src) >= cells_.size()) return;
  std::vector<int32_t>& to = Positions(dst);
  const std::vector<int32_t>& from = cells_[static_cast<size_t>(src)];  // after Positions(dst): no reallocation now
  const auto end = p1 < 0 ? from.size() : std::min(from.size(), static_cast<size_t>(p1));
  for (size_t p = static_cast<size_t>(std::max(0, p0)); p < end; ++p) {
    if (from[p] == kNone) continue;
    if (p >= to.size()) to.resize(p + 1, kNone);
    if (to[p] != kNone) Release(to[p]);
    to[p] = from[p];
    Hold(to[p]);
  }
}

int64_t CellLedger::n_held(int32_t seq) const {
  if (seq < 0 || static_cast<size_t>(seq) >= cells_.size()) return 0;
  const auto& held = cells_[static_cast<size_t>(seq)];
  return std::count_if(held.begin(), held.end(), [](int32_t c) { return c != kNone; });
}

}  // namespace hearth::engine
