#include "engine/cell_ledger.h"

#include <gtest/gtest.h>

namespace hearth::engine {
namespace {

void AppendRange(CellLedger& l, int32_t seq, int32_t p0, int32_t p1) {
  for (int32_t p = p0; p < p1; ++p) l.Append(seq, p);
}

TEST(CellLedgerTest, CopiesShareCellsUntilEveryHolderLetsGo) {
  CellLedger l;
  AppendRange(l, 0, 0, 100);
  l.Copy(0, 1, 0, -1);
  l.Copy(0, 2, 0, 40);
  EXPECT_EQ(l.n_used(), 100);
  EXPECT_EQ(l.n_held(1), 100);
  EXPECT_EQ(l.n_held(2), 40);

  AppendRange(l, 1, 100, 110);  // the copy goes on with cells of its own
  EXPECT_EQ(l.n_used(), 110);
  l.Remove(0, 0, -1);
  EXPECT_EQ(l.n_used(), 110) << "1 still holds every cell 0 held";
  l.Remove(1, 50, -1);
  EXPECT_EQ(l.n_used(), 50);
  l.Remove(1, 0, -1);
  EXPECT_EQ(l.n_used(), 40) << "2's share";
  l.Remove(2, 0, -1);
  EXPECT_EQ(l.n_used(), 0);
}

// A suffix over another sequence's prefix (Context::RestoreSuffix): positions from `from`
// first, the prefix shared after; a position held again is released first.
TEST(CellLedgerTest, PositionsFillInAnyOrderAndReplaceWhatTheyHeld) {
  CellLedger l;
  AppendRange(l, 0, 0, 60);
  AppendRange(l, 1, 60, 85);
  l.Copy(0, 1, 0, 60);
  EXPECT_EQ(l.n_used(), 85);
  EXPECT_EQ(l.n_held(1), 85);
  l.Append(1, 10);  // its own cell now; 0 keeps the old one
  EXPECT_EQ(l.n_used(), 86);
  l.Copy(0, 1, 0, 60);
  EXPECT_EQ(l.n_used(), 85);
  l.Remove(1, 0, 60);
  EXPECT_EQ(l.n_held(1), 25);
  l.Remove(7, 0, -1);  // a sequence never seen holds nothing
  l.Copy(7, 1, 0, -1);
  EXPECT_EQ(l.n_used(), 85);
}

}  // namespace
}  // namespace hearth::engine
