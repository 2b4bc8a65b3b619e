#include "engine/memory.h"

#include <gtest/gtest.h>

#include "testing/test_env.h"

namespace hearth::engine {
namespace {

ContextOptions Options(int n_seq_max) {
  ContextOptions o;
  o.n_seq_max = n_seq_max;
  o.n_threads = 1;
  return o;
}

TEST(MemoryTest, MeasuresKvPerCellAndRecurrentStateOfTheHybridModel) {
  auto m = MeasureContextMemory(testing::TestModelPath("qwen35"), {}, Options(4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->n_ctx_train, 262144);
  // One attention layer in four, 2 KV heads of 64, K and V in f16.
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 1 * 2 * 64 * 2 * 2);
  // Three DeltaNet layers, each with 4 value heads of 32 x 32 f32 and a conv state.
  EXPECT_GT(m->recurrent_bytes_per_seq, 3u * 4 * 32 * 32 * 4);
  ASSERT_FALSE(m->pools.empty());
  EXPECT_TRUE(m->pools[0].host);
  EXPECT_GT(m->pools[0].free_bytes, 0u);
  EXPECT_GT(m->pools[0].weights_bytes, 0u);
}

TEST(MemoryTest, MeasuresQwen3NextLikeTheOtherDeltaNetHybrid) {
  auto m = MeasureContextMemory(testing::TestModelPath("qwen3next"), {}, Options(4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->n_ctx_train, 262144);
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 1 * 2 * 64 * 2 * 2);
  // Three DeltaNet layers of 4 value heads of 32 x 32 f32, plus their conv states
  // (3 columns of 2 * 64 + 128 channels, f32).
  EXPECT_EQ(m->recurrent_bytes_per_seq, 3u * (4 * 32 * 32 * 4 + 3 * 256 * 4));
}

// Granite 4.0-H: the Mamba-2 layers' state is a d_state x d_inner matrix and the conv
// window of x, B and C, whatever the context's size.
TEST(MemoryTest, MeasuresTheMamba2HybridsStatePerSequence) {
  auto m = MeasureContextMemory(testing::TestModelPath("granitehybrid"), {}, Options(4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // One attention layer in four, 1 KV head of 64, K and V in f16.
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 1 * 1 * 64 * 2 * 2);
  // Three Mamba-2 layers: state 16 x d_inner 256, f32, plus 3 conv columns of
  // d_inner + 2 * 16 channels, f32.
  EXPECT_EQ(m->recurrent_bytes_per_seq, 3u * (16 * 256 * 4 + 3 * (256 + 2 * 16) * 4));
}

// Only the global layer's KV grows with the cells: the sliding layers' cache holds a
// window per sequence whatever the context's size.
TEST(MemoryTest, SlidingWindowLayersAddNoKvPerCell) {
  auto m = MeasureContextMemory(testing::TestModelPath("gemma4"), {}, Options(4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 1 * 1 * 64 * 2 * 2);  // 1 global layer, 1 KV head of 64
  // The sliding layers' cache, shared by the 4 sequences: llama.cpp sizes it to the window
  // per sequence plus a micro-batch (512), rounded up to 256 cells: 32 * 4 + 512 -> 768.
  EXPECT_EQ(m->recurrent_bytes_per_seq, 768u * 3 * (2 * 32 * 2 * 2) / 4);
}

// gpt-oss alternates: the two full layers' KV grows with the cells, the two sliding
// layers' cache holds a window per sequence, sized as Gemma 4's.
TEST(MemoryTest, GptOssSplitsItsKvBetweenFullAndSlidingLayers) {
  auto m = MeasureContextMemory(testing::TestModelPath("gpt-oss"), {}, Options(4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->n_ctx_train, 131072);
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 2 * 2 * 32 * 2 * 2);  // 2 full layers, 2 KV heads of 32
  EXPECT_EQ(m->recurrent_bytes_per_seq, 768u * 2 * (2 * 32 * 2 * 2) / 4);
}

// Without flash attention the attention scores grow with the cells attended over; with
// it (the default on a CPU) they do not.
TEST(MemoryTest, ComputeBuffersGrowWithTheCellsOnlyWithoutFlashAttention) {
  ContextOptions off = Options(4);
  off.flash_attn = FlashAttn::kOff;
  auto without = MeasureContextMemory(testing::TestModelPath("qwen35"), {}, off);
  ContextOptions on = Options(4);
  on.flash_attn = FlashAttn::kOn;
  auto with = MeasureContextMemory(testing::TestModelPath("qwen35"), {}, on);
  ASSERT_TRUE(without.ok() && with.ok());
  EXPECT_GT(without->pools[0].compute_bytes_per_cell, 0);
  EXPECT_LT(with->pools[0].compute_bytes_per_cell, without->pools[0].compute_bytes_per_cell);
}

TEST(MemoryTest, AttentionOnlyModelHasNoRecurrentState) {
  auto m = MeasureContextMemory(testing::TestModelPath("qwen3"), {}, Options(2));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->n_ctx_train, 40960);
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_cell, 4 * 2 * 32 * 2 * 2);  // 4 layers, 2 KV heads of 32
  EXPECT_EQ(m->recurrent_bytes_per_seq, 0u);
}

TEST(MemoryTest, MissingFileIsNotFound) {
  EXPECT_EQ(MeasureContextMemory("/nonexistent.gguf", {}, Options(1)).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hearth::engine
