#include "server/batch_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace hearth::server {
namespace {

std::vector<engine::Token> Iota(size_t n, engine::Token first = 100) {
  std::vector<engine::Token> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

BatchCandidate Generating(size_t slot, engine::SeqId seq, engine::Pos n_past, engine::Token pending,
                          const std::vector<engine::Token>& prompt) {
  return {.slot = slot, .seq = seq, .n_past = n_past, .pending = pending, .prompt = prompt,
          .n_prompt_done = prompt.size()};
}

BatchCandidate Prefilling(size_t slot, engine::SeqId seq, const std::vector<engine::Token>& prompt, size_t done,
                          std::optional<size_t> next_snapshot = std::nullopt, bool background = false) {
  return {.slot = slot, .seq = seq, .n_past = static_cast<engine::Pos>(done), .prompt = prompt, .n_prompt_done = done,
          .next_snapshot = next_snapshot, .background = background};
}

TEST(BatchPlannerTest, DecodeTokensComeFirstWithLogitsThenPrefill) {
  const auto a = Iota(10), b = Iota(20, 500);
  const std::vector<BatchCandidate> c = {Prefilling(0, 3, b, 4), Generating(1, 5, 12, 77, a)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 64});
  ASSERT_EQ(plan.tokens.size(), 1u + 16u);
  EXPECT_EQ(plan.tokens[0].token, 77);
  EXPECT_EQ(plan.tokens[0].pos, 12);
  EXPECT_EQ(plan.tokens[0].seq, 5);
  EXPECT_TRUE(plan.tokens[0].logits);
  EXPECT_EQ(plan.slots[1].logits_index, 0);
  EXPECT_TRUE(plan.slots[1].in_batch);
  for (size_t i = 1; i < plan.tokens.size(); ++i) {
    EXPECT_EQ(plan.tokens[i].token, b[3 + i]);
    EXPECT_EQ(plan.tokens[i].pos, static_cast<engine::Pos>(3 + i));
    EXPECT_EQ(plan.tokens[i].seq, 3);
    EXPECT_EQ(plan.tokens[i].logits, i + 1 == plan.tokens.size());  // the prompt's last token samples
  }
  EXPECT_EQ(plan.slots[0].logits_index, 16);
  EXPECT_EQ(plan.slots[0].n_prompt_done_after, 20u);
}

TEST(BatchPlannerTest, PrefillStopsAtTheNextSnapshotWithoutLogits) {
  const auto p = Iota(100);
  const std::vector<BatchCandidate> c = {Prefilling(0, 0, p, 10, 40)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 512});
  ASSERT_EQ(plan.tokens.size(), 30u);
  EXPECT_EQ(plan.tokens.front().pos, 10);
  EXPECT_EQ(plan.tokens.back().pos, 39);
  for (const auto& t : plan.tokens) EXPECT_FALSE(t.logits);
  EXPECT_FALSE(plan.slots[0].logits_index.has_value());
  EXPECT_EQ(plan.slots[0].n_prompt_done_after, 40u);
}

// Invariant 7: 540 tokens to the stop would run as ubatches of 512 and 28, the 28 at
// several times the cost a token: two decodes of 270 instead. 600 (512 and 88) go at once,
// and so does everything where no ubatch costs more a token.
TEST(BatchPlannerTest, PrefillSplitsAShortLastUbatchWithTheOneBefore) {
  const auto p = Iota(700);
  const BatchLimits limits{.n_batch = 2048, .n_ubatch = 512, .prefill_floor = 64};
  const std::vector<BatchCandidate> first = {Prefilling(0, 0, p, 0, 540)};
  EXPECT_EQ(PlanBatch(first, {}, limits).slots[0].n_prompt_done_after, 270u);
  const std::vector<BatchCandidate> second = {Prefilling(0, 0, p, 270, 540)};
  EXPECT_EQ(PlanBatch(second, {}, limits).slots[0].n_prompt_done_after, 540u);
  const std::vector<BatchCandidate> longer_tail = {Prefilling(0, 0, p, 0, 600)};
  EXPECT_EQ(PlanBatch(longer_tail, {}, limits).slots[0].n_prompt_done_after, 600u);
  const std::vector<BatchCandidate> whole = {Prefilling(0, 0, p, 0, 512)};
  EXPECT_EQ(PlanBatch(whole, {}, limits).slots[0].n_prompt_done_after, 512u);
  EXPECT_EQ(PlanBatch(first, {}, {.n_batch = 2048, .n_ubatch = 512}).slots[0].n_prompt_done_after, 540u);
}

// Invariant 7: a prompt longer than a decode leaves the next decode at least the floor
// (2,100 tokens: 2,036 then 64, not 2,048 then 52), in whole ubatches where it can.
TEST(BatchPlannerTest, PrefillShortOfItsStopLeavesTheNextDecodeAtLeastTheFloor) {
  const BatchLimits limits{.n_batch = 2048, .n_ubatch = 512, .prefill_floor = 64};
  const auto p = Iota(2100);
  const std::vector<BatchCandidate> c = {Prefilling(0, 0, p, 0)};
  const BatchPlan plan = PlanBatch(c, {}, limits);
  EXPECT_EQ(plan.slots[0].n_prompt_done_after, 2036u);
  EXPECT_FALSE(plan.slots[0].logits_index.has_value());
  const std::vector<BatchCandidate> rest = {Prefilling(0, 0, p, 2036)};
  const BatchPlan last = PlanBatch(rest, {}, limits);
  EXPECT_EQ(last.slots[0].n_prompt_done_after, 2100u);
  EXPECT_TRUE(last.slots[0].logits_index.has_value());
  const auto longer = Iota(2200);
  const std::vector<BatchCandidate> d = {Prefilling(0, 0, longer, 0)};
  EXPECT_EQ(PlanBatch(d, {}, limits).slots[0].n_prompt_done_after, 2048u);
}

// Beside decode tokens the split depends on the model: the chunk goes to its stop.
TEST(BatchPlannerTest, PrefillBesideDecodeTokensGoesToItsStop) {
  const auto g = Iota(5), p = Iota(700, 900);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 5, 1, g), Prefilling(1, 1, p, 0, 540)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 2048, .n_ubatch = 512, .prefill_floor = 64});
  EXPECT_EQ(plan.slots[1].n_prompt_done_after, 540u);
}

TEST(BatchPlannerTest, PrefillSharesWhatDecodeTokensLeaveOfTheBudget) {
  const auto g = Iota(5), p1 = Iota(50), p2 = Iota(50, 900);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 5, 1, g), Prefilling(1, 1, p1, 0), Prefilling(2, 2, p2, 0)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 32});
  ASSERT_EQ(plan.tokens.size(), 32u);
  EXPECT_EQ(plan.slots[1].n_prompt_done_after, 31u);
  EXPECT_TRUE(plan.slots[1].in_batch);
  // Nothing is left for the third slot: it stays where it was and is not in the batch.
  EXPECT_EQ(plan.slots[2].n_prompt_done_after, 0u);
  EXPECT_FALSE(plan.slots[2].in_batch);
}

TEST(BatchPlannerTest, BackgroundWaitsWhileARequestPrefills) {
  const auto req = Iota(8), bg = Iota(200, 300);
  const std::vector<BatchCandidate> c = {Prefilling(0, 0, bg, 0, std::nullopt, true), Prefilling(1, 1, req, 0)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 512});
  EXPECT_FALSE(plan.slots[0].in_batch);
  EXPECT_EQ(plan.slots[0].n_prompt_done_after, 0u);
  EXPECT_EQ(plan.tokens.size(), 8u);
}

TEST(BatchPlannerTest, BackgroundChunksAreSmallAndNeverSample) {
  const auto g = Iota(4), bg = Iota(200, 300);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 4, 9, g), Prefilling(1, 1, bg, 180, std::nullopt, true)};
  const BatchPlan plan = PlanBatch(c, {}, {.n_batch = 512, .background_chunk = 32});
  ASSERT_EQ(plan.tokens.size(), 1u + 20u);  // the prompt's last 20 tokens, under the chunk
  for (size_t i = 1; i < plan.tokens.size(); ++i) EXPECT_FALSE(plan.tokens[i].logits);
  EXPECT_FALSE(plan.slots[1].logits_index.has_value());
  EXPECT_EQ(plan.slots[1].n_prompt_done_after, 200u);

  const std::vector<BatchCandidate> c2 = {Prefilling(0, 1, bg, 0, std::nullopt, true)};
  EXPECT_EQ(PlanBatch(c2, {}, {.n_batch = 512, .background_chunk = 32}).tokens.size(), 32u);
  // Beside a decode token, one more: a hybrid model's ubatch split takes the chunk's
  // first token with the decode token, and the rest stays a whole chunk.
  const std::vector<BatchCandidate> c3 = {Generating(0, 0, 4, 9, g), Prefilling(1, 1, bg, 0, std::nullopt, true)};
  EXPECT_EQ(PlanBatch(c3, {}, {.n_batch = 512, .background_chunk = 32}).tokens.size(), 1u + 33u);
}

TEST(BatchPlannerTest, ShadowWaitsForAWholeChunkAndGrowsWhenFarBehind) {
  const auto target = Iota(600);
  auto shadow = [&](int unfed) {
    return ShadowCandidate{.slot = 0, .seq = 7, .target = target, .n_held = 10, .unfed = unfed};
  };
  auto planned = [&](int unfed) {
    const std::vector<ShadowCandidate> s = {shadow(unfed)};
    return PlanBatch({}, s, {.n_batch = 512, .shadow_chunk = 8}).shadow_tokens.at(0);
  };
  EXPECT_EQ(planned(7), 0u);
  EXPECT_EQ(planned(8), 8u);
  EXPECT_EQ(planned(64), 8u);
  EXPECT_EQ(planned(65), 16u);
  EXPECT_EQ(planned(257), 32u);
  const std::vector<ShadowCandidate> s = {shadow(20)};
  const BatchPlan plan = PlanBatch({}, s, {.n_batch = 512, .shadow_chunk = 8});
  ASSERT_EQ(plan.tokens.size(), 8u);
  EXPECT_EQ(plan.tokens[0].token, target[10]);
  EXPECT_EQ(plan.tokens[0].pos, 10);
  EXPECT_EQ(plan.tokens[0].seq, 7);
  EXPECT_FALSE(plan.tokens[0].logits);
}

TEST(BatchPlannerTest, ShadowChunkEndsAtTheNextMessageEndAndWithinTheBudget) {
  const auto target = Iota(100);
  const std::vector<int32_t> ends = {5, 13, 40};
  const std::vector<ShadowCandidate> s = {{.slot = 0, .seq = 1, .target = target, .n_held = 10, .unfed = 30,
                                           .message_ends = ends}};
  EXPECT_EQ(PlanBatch({}, s, {.n_batch = 512}).shadow_tokens[0], 3u);  // to 13
  const auto g = Iota(3);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 3, 1, g), Generating(1, 2, 3, 1, g)};
  const std::vector<ShadowCandidate> s2 = {{.slot = 0, .seq = 1, .target = target, .n_held = 20, .unfed = 30}};
  const BatchPlan plan = PlanBatch(c, s2, {.n_batch = 6});
  EXPECT_EQ(plan.shadow_tokens[0], 4u);
  EXPECT_EQ(plan.tokens.size(), 6u);
}

// Where a step's every token costs compute (a CPU), shadows are not fed beside the decode:
// the step carries the decode token and the prefill alone, however much a shadow waits.
TEST(BatchPlannerTest, ShadowsStayOutOfTheStepsWhenNotFedInSteps) {
  const auto target = Iota(600), g = Iota(3), p = Iota(40, 700);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 3, 1, g), Prefilling(1, 1, p, 0)};
  const std::vector<ShadowCandidate> s = {{.slot = 0, .seq = 2, .target = target, .n_held = 10, .unfed = 100}};
  for (bool in_steps : {true, false}) {
    const BatchPlan plan =
        PlanBatch(c, s, {.n_batch = 512, .background_chunk = 64, .shadow_chunk = 8, .shadows_in_steps = in_steps});
    ASSERT_EQ(plan.shadow_tokens.size(), 1u);
    EXPECT_EQ(plan.shadow_tokens[0], in_steps ? 16u : 0u) << "fewer than two tiles wait: the drain feeds them";
    EXPECT_EQ(plan.tokens.size(), 1u + 40u + plan.shadow_tokens[0]);
    const auto on_shadow = std::count_if(plan.tokens.begin(), plan.tokens.end(), [](const auto& t) { return t.seq == 2; });
    EXPECT_EQ(on_shadow, in_steps ? 16 : 0);
  }
}

// Not fed in steps (a CPU), a shadow far behind (a re-rendered tool loop) still goes in
// whole tiles, ending at a message end only where that leaves a tile or more. Beside its
// reply's decode token a tile is one token longer: a hybrid model's ubatch split takes
// its first token with the decode token, and the other 64 stay one flash-attention tile.
TEST(BatchPlannerTest, ShadowsFarBehindGoInWholeTilesWhenNotFedInSteps) {
  const auto target = Iota(600), g = Iota(3);
  const std::vector<BatchCandidate> decoding = {Generating(0, 0, 3, 1, g)};
  const BatchLimits cpu{.n_batch = 512, .background_chunk = 64, .shadows_in_steps = false};
  const auto planned = [&](std::vector<int32_t> ends, std::span<const BatchCandidate> c) {
    const std::vector<ShadowCandidate> s = {
        {.slot = 0, .seq = 2, .target = target, .n_held = 10, .unfed = 300, .message_ends = std::move(ends)}};
    return PlanBatch(c, s, cpu).shadow_tokens.at(0);
  };
  EXPECT_EQ(planned({}, decoding), 65u);
  EXPECT_EQ(planned({}, {}), 64u) << "alone in the step: one tile";
  EXPECT_EQ(planned({40, 100}, decoding), 90u) << "past the end at 40, to the one at 100";
  EXPECT_EQ(planned({40, 200}, decoding), 65u) << "no end within the next tile: one tile";
}

// A shadow without tiles (--shadow-prefill reply-end, or paced where the client's pause
// holds the rest) gets nothing beside the decode, however far behind it is: warm-ahead
// takes the rest after the reply. Another shadow in the same step still gets its tile.
TEST(BatchPlannerTest, NoShadowTokensInTheStepsForAShadowWithoutTiles) {
  const auto target = Iota(600), g = Iota(3);
  const std::vector<BatchCandidate> c = {Generating(0, 0, 3, 1, g), Generating(1, 1, 3, 1, g)};
  const std::vector<ShadowCandidate> s = {
      {.slot = 0, .seq = 2, .target = target, .n_held = 10, .unfed = 300, .tiles = false},
      {.slot = 1, .seq = 3, .target = target, .n_held = 10, .unfed = 300}};
  const BatchPlan plan = PlanBatch(c, s, {.n_batch = 512, .background_chunk = 64, .shadows_in_steps = false});
  EXPECT_EQ(plan.shadow_tokens.at(0), 0u);
  EXPECT_EQ(plan.shadow_tokens.at(1), 65u) << "the other shadow's tile, beside decode tokens";
  EXPECT_EQ(plan.tokens.size(), 2u + 65u) << "the decode tokens and one tile";
}

TEST(BatchPlannerTest, IdleSlotsPlanNothing) {
  const auto p = Iota(4);
  BatchCandidate done = Prefilling(0, 0, p, 4);  // prompt in, first token not sampled yet
  const std::vector<BatchCandidate> c = {done};
  const BatchPlan plan = PlanBatch(c, {}, {});
  EXPECT_TRUE(plan.tokens.empty());
  ASSERT_EQ(plan.slots.size(), 1u);
  EXPECT_FALSE(plan.slots[0].in_batch);
  EXPECT_EQ(plan.slots[0].n_prompt_done_after, 4u);
}

}  // namespace
}  // namespace hearth::server
