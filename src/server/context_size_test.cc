#include "server/context_size.h"

#include <gtest/gtest.h>

namespace hearth::server {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

MemoryBudget Host(uint64_t free_bytes, uint64_t reserved_bytes, double bytes_per_cell) {
  return {"host", free_bytes, reserved_bytes, bytes_per_cell};
}

TEST(ContextSizeTest, TrainingContextWhenMemoryHoldsIt) {
  // 262144 cells at 16 KiB each are 4 GiB; 32 GiB free holds them and the 3 GiB reserved.
  ContextSizeInputs in{.n_ctx_train = 262144, .budgets = {Host(32 * kGiB, 3 * kGiB, 16384)}};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.n_ctx, 262144);
  EXPECT_EQ(c.n_ctx_seq, 262144);
  EXPECT_EQ(c.bound, ContextBound::kTrainingContext);
  ASSERT_TRUE(c.memory_cells.has_value());
  EXPECT_EQ(*c.memory_cells, static_cast<int64_t>((32 - 3 - 1) * kGiB / 16384));
  EXPECT_NE(ExplainContextSize(in, c).find("training context"), std::string::npos);
}

TEST(ContextSizeTest, MemoryCapsTheCellsRoundedDown) {
  // 8 GiB free - 1 GiB headroom - 2.5 GiB reserved leaves 4.5 GiB: 4.5 GiB / 48 KiB =
  // 98304 cells, rounded down to 256.
  ContextSizeInputs in{.n_ctx_train = 262144, .budgets = {Host(8 * kGiB, 5 * kGiB / 2, 48 * 1024 + 7)}};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.bound, ContextBound::kMemory);
  EXPECT_EQ(c.n_ctx % kCellAlign, 0);
  EXPECT_LE(static_cast<double>(c.n_ctx) * (48 * 1024 + 7), 4.5 * kGiB);
  EXPECT_GT(static_cast<double>(c.n_ctx + kCellAlign) * (48 * 1024 + 7), 4.5 * kGiB);
  EXPECT_EQ(c.n_ctx_seq, c.n_ctx);
  EXPECT_EQ(c.binding_memory, "host");
  EXPECT_NE(ExplainContextSize(in, c).find("bound by memory"), std::string::npos);
}

TEST(ContextSizeTest, TheTightestMemoryBinds) {
  // The GPU holds the KV; host RAM holds little of it but more reserved.
  ContextSizeInputs in{.n_ctx_train = 131072,
                       .budgets = {Host(64 * kGiB, 4 * kGiB, 64), {"CUDA0", 10 * kGiB, 7 * kGiB, 65536}}};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.bound, ContextBound::kMemory);
  EXPECT_EQ(c.binding_memory, "CUDA0");
  EXPECT_EQ(c.n_ctx, static_cast<int>(2 * kGiB / 65536));
}

TEST(ContextSizeTest, NeverBelowTheMinimum) {
  ContextSizeInputs in{.n_ctx_train = 262144, .budgets = {Host(2 * kGiB, 2 * kGiB, 16384)}};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.n_ctx, kMinCells);
  EXPECT_EQ(c.bound, ContextBound::kMemoryShort);
  EXPECT_EQ(*c.memory_cells, 0);

  // A model trained on fewer cells than the minimum gets its training context.
  in.n_ctx_train = 2048;
  EXPECT_EQ(ChooseContextSize(in).n_ctx, 2048);
}

TEST(ContextSizeTest, CtxSizeOverridesAndTheTrainingContextCapsASequence) {
  ContextSizeInputs in{.requested_cells = 65536, .n_ctx_train = 40960, .budgets = {Host(2 * kGiB, kGiB, 16384)}};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.n_ctx, 65536);  // more than memory allows: the user said so
  EXPECT_EQ(c.n_ctx_seq, 40960);
  EXPECT_EQ(c.bound, ContextBound::kRequested);
  const std::string why = ExplainContextSize(in, c);
  EXPECT_NE(why.find("given by --ctx-size"), std::string::npos) << why;
  EXPECT_NE(why.find("more than memory allows"), std::string::npos) << why;
  EXPECT_NE(why.find("at most 40960"), std::string::npos) << why;

  in.requested_cells = 8192;
  const ContextSizeChoice small = ChooseContextSize(in);
  EXPECT_EQ(small.n_ctx, 8192);
  EXPECT_EQ(small.n_ctx_seq, 8192);
}

TEST(ContextSizeTest, UnmeasuredMemoryTakesTheTrainingContext) {
  ContextSizeInputs in{.n_ctx_train = 32768};
  const ContextSizeChoice c = ChooseContextSize(in);
  EXPECT_EQ(c.n_ctx, 32768);
  EXPECT_EQ(c.bound, ContextBound::kTrainingContext);
  EXPECT_FALSE(c.memory_cells.has_value());

  in.n_ctx_train = 0;
  EXPECT_EQ(ChooseContextSize(in).n_ctx, kCellsWithoutTrainingContext);
  EXPECT_EQ(ChooseContextSize(in).bound, ContextBound::kUnknown);
}

TEST(ContextSizeTest, BudgetsReserveWeightsFixedBuffersAndTheRamTierOnTheHost) {
  engine::ContextMemory m;
  m.pools.push_back({.name = "host", .host = true, .free_bytes = 100, .total_bytes = 200, .weights_bytes = 10,
                     .fixed_bytes = 5, .kv_bytes_per_cell = 2, .compute_bytes_per_cell = 1});
  m.pools.push_back({.name = "CUDA0", .host = false, .free_bytes = 50, .total_bytes = 80, .weights_bytes = 20,
                     .fixed_bytes = 3, .kv_bytes_per_cell = 4, .compute_bytes_per_cell = 0.5});
  const std::vector<MemoryBudget> b = BudgetsFor(m, 1000);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].reserved_bytes, 1015u);
  EXPECT_EQ(b[0].bytes_per_cell, 3);
  EXPECT_EQ(b[1].reserved_bytes, 23u);
  EXPECT_EQ(b[1].bytes_per_cell, 4.5);
  EXPECT_EQ(b[1].free_bytes, 50u);
}

TEST(ContextSizeTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024), "1.5 MiB");
  EXPECT_EQ(FormatBytes(20.3 * kGiB), "20.3 GiB");
}

}  // namespace
}  // namespace hearth::server
