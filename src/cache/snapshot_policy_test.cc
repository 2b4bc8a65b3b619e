#include "cache/snapshot_policy.h"

#include <gtest/gtest.h>

namespace hearth::cache {
namespace {

using Positions = std::vector<int32_t>;
using P = SnapshotPolicy;

TEST(SnapshotPolicyTest, RequestKeepsMessageEndsGenerationStartAndPromptEnd) {
  const Positions ends = {5, 12, 20};
  // The last end (20) lies 3 tokens before the generation start: served by it.
  EXPECT_EQ(P::RequestPositions({.n_tokens = 30, .message_ends = ends, .generation_start = 23}),
            (Positions{5, 12, 23, 30}));
  // Exactly kHeaderTokens before it is still served; one more is kept.
  EXPECT_EQ(P::RequestPositions({.n_tokens = 30, .message_ends = ends, .generation_start = 24}),
            (Positions{5, 12, 24, 30}));
  EXPECT_EQ(P::RequestPositions({.n_tokens = 30, .message_ends = ends, .generation_start = 25}),
            (Positions{5, 12, 20, 25, 30}));
}

TEST(SnapshotPolicyTest, RequestKeepsTheLastEndWhereTheNextRequestResumesFromIt) {
  const Positions ends = {5, 20};
  EXPECT_EQ(P::RequestPositions(
                {.n_tokens = 30, .message_ends = ends, .generation_start = 23, .resumes_at_last_end = true}),
            (Positions{5, 20, 23, 30}));
  // The generation start is the prompt's end: a retry must resume before the last token.
  EXPECT_EQ(P::RequestPositions({.n_tokens = 23, .message_ends = ends, .generation_start = 23}),
            (Positions{5, 20, 23}));
}

TEST(SnapshotPolicyTest, RawPromptKeepsItsEndOnly) {
  EXPECT_EQ(P::RequestPositions({.n_tokens = 17, .generation_start = 17}), (Positions{17}));
}

// A tool turn resumed at the reply's end (100): the call's end 42 tokens later would split
// the prefill into a 42-token decode and another; the generation start and the prompt's
// end stay, and so do the positions before the resume (their states are there).
TEST(SnapshotPolicyTest, PrefillStopsSkipAnEndTooCloseAfterTheLastStop) {
  const Positions positions = {50, 90, 142, 278, 284};
  const Positions kept = {278, 284};
  EXPECT_EQ(P::PrefillStops(positions, 100, 64, 278, kept), (Positions{50, 90, 278, 284}));
  // 64 tokens after it is far enough.
  EXPECT_EQ(P::PrefillStops(positions, 78, 64, 278, kept), (Positions{50, 142, 278, 284}));
  // Where every decode costs the same a token, every position stays.
  EXPECT_EQ(P::PrefillStops(positions, 100, 1, 278, kept), positions);
}

TEST(SnapshotPolicyTest, PrefillStopsCountFromTheLastStopKept) {
  const Positions positions = {20, 40, 70, 90, 140, 200, 206};
  const Positions kept = {200, 206};
  // 20 and 40 are too close to the start, 70 is not; 90 is too close to 70, 140 is not.
  EXPECT_EQ(P::PrefillStops(positions, 0, 64, 200, kept), (Positions{70, 140, 200, 206}));
}

// A system prompt far from the start keeps its state though the user's message after it
// is short: another conversation that begins with it resumes there.
TEST(SnapshotPolicyTest, PrefillStopsKeepAFarEndBeforeAShortDecode) {
  const Positions positions = {10000, 10054, 10060};
  const Positions kept = {10054, 10060};
  EXPECT_EQ(P::PrefillStops(positions, 0, 64, 10054, kept), positions);
}

TEST(SnapshotPolicyTest, PrefillStopsAlwaysKeepBreakpointsAndTheEndTheNextRequestResumesFrom) {
  // 126 lies within kHeaderTokens before the generation start (130): invariant 3 kept it
  // because the next request resumes there.
  const Positions positions = {110, 126, 130, 136};
  const Positions kept = {110, 130, 136};  // 110: a client's breakpoint
  EXPECT_EQ(P::PrefillStops(positions, 100, 64, 130, kept), positions);
  const Positions without_breakpoint = {130, 136};
  EXPECT_EQ(P::PrefillStops(positions, 100, 64, 130, without_breakpoint), (Positions{126, 130, 136}));
}

TEST(SnapshotPolicyTest, AddPositionKeepsThemAscendingWithoutRepeats) {
  Positions p = {5, 12, 30};
  P::AddPosition(p, 9);
  EXPECT_EQ(p, (Positions{5, 9, 12, 30}));
  P::AddPosition(p, 12);
  EXPECT_EQ(p, (Positions{5, 9, 12, 30}));
}

TEST(SnapshotPolicyTest, ServingPositionIsTheGenerationStartJustAfterTheLastEnd) {
  EXPECT_EQ(P::ServingPosition(20, 23), 23);
  EXPECT_EQ(P::ServingPosition(20, 24), 24);
  EXPECT_EQ(P::ServingPosition(20, 25), 20);
  EXPECT_EQ(P::ServingPosition(20, 19), 20);  // the generation start before it serves nothing
}

TEST(SnapshotPolicyTest, OnlyARequestsPromptEndWaitsForTheFirstToken) {
  EXPECT_TRUE(P::WaitsForFirstToken(30, 30, /*background=*/false));
  EXPECT_FALSE(P::WaitsForFirstToken(23, 30, false));
  EXPECT_FALSE(P::WaitsForFirstToken(30, 30, /*background=*/true));
}

TEST(SnapshotPolicyTest, OnlyARequestsGenerationStartGoesToTheSharedTierWhole) {
  EXPECT_TRUE(P::SharesWhole(23, 23, /*background=*/false));
  EXPECT_FALSE(P::SharesWhole(30, 23, false));
  EXPECT_FALSE(P::SharesWhole(23, 23, /*background=*/true));
}

TEST(SnapshotPolicyTest, SharedCandidatesAreEachPositionAndAHeaderPastItDeepestFirst) {
  const Positions positions = {3, 10};
  EXPECT_EQ(P::SharedCandidates(positions, 12), (Positions{12, 11, 10, 7, 6, 5, 4, 3}));
  // Nothing past max_reuse, nothing at 0.
  const Positions at_zero = {0};
  EXPECT_EQ(P::SharedCandidates(at_zero, 2), (Positions{2, 1}));
}

TEST(SnapshotPolicyTest, SharedCandidatesAreTheDeepestFew) {
  Positions many;
  for (int32_t p = 10; p <= 1000; p += 10) many.push_back(p);
  const Positions out = P::SharedCandidates(many, 2000);
  ASSERT_EQ(out.size(), P::kSharedCandidates);
  EXPECT_EQ(out.front(), 2000);
  EXPECT_EQ(out[1], 1004);
  EXPECT_EQ(out.back(), 882);  // 2000, then twelve groups of five from 1004 down, then 884..882
}

TEST(SnapshotPolicyTest, ShadowKeepsStatesAtItsTargetsMessageEnds) {
  const Positions ends = {12, 40};
  EXPECT_TRUE(P::ShadowKeepsStateAt(ends, 12));
  EXPECT_TRUE(P::ShadowKeepsStateAt(ends, 40));
  EXPECT_FALSE(P::ShadowKeepsStateAt(ends, 41));
}

TEST(SnapshotPolicyTest, DrainKeepsMessageEndsPastWhatIsFedAndItsEnd) {
  const Positions ends = {12, 40, 50};
  EXPECT_EQ(P::ShadowDrainStates(ends, 20, 45, std::nullopt), (Positions{40, 45, 50}));
  EXPECT_EQ(P::ShadowDrainStates(ends, 50, 50, std::nullopt), (Positions{50}));
}

TEST(SnapshotPolicyTest, DrainOfACutReplyKeepsItsLastPositions) {
  const Positions ends = {60};
  EXPECT_EQ(P::ShadowDrainStates(ends, 20, 64, 30), (Positions{22, 23, 24, 25, 26, 27, 28, 29, 30, 60, 64}));
  // Only those past what the shadow holds.
  EXPECT_EQ(P::ShadowDrainStates(ends, 27, 64, 30), (Positions{28, 29, 30, 60, 64}));
}

TEST(SnapshotPolicyTest, CutOffStatesNeverStartAtZero) {
  EXPECT_EQ(P::FirstCutOffState(30), 22);
  EXPECT_EQ(P::FirstCutOffState(9), 1);
  EXPECT_EQ(P::FirstCutOffState(5), 1);
}

TEST(SnapshotPolicyTest, WarmAheadKeepsPositionsBeforeTheNextMessageAndItsStart) {
  const Positions next = {5, 12, 23, 30};
  const auto w = P::WarmAheadPositions(next, 23, std::nullopt);
  EXPECT_EQ(w.positions, (Positions{5, 12, 23}));
  EXPECT_FALSE(w.max_resume.has_value());
}

TEST(SnapshotPolicyTest, WarmAheadOfACutReplyKeepsItsLastPositionsAndResumesBeforeThem) {
  const Positions next = {5, 12, 23, 30};
  const auto w = P::WarmAheadPositions(next, 23, 14);
  EXPECT_EQ(w.positions, (Positions{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 23}));
  EXPECT_EQ(w.max_resume, 6);
}

TEST(SnapshotPolicyTest, AdoptedTailIsARequestsReplyFromItsShadowFork) {
  EXPECT_EQ(P::AdoptedTailStart(/*background=*/false, 23), 23);
  EXPECT_EQ(P::AdoptedTailStart(false, -1), 0);  // no fork (raw prompt)
  EXPECT_EQ(P::AdoptedTailStart(/*background=*/true, 23), 0);
}

TEST(SnapshotPolicyTest, RedundantDeviceSequenceLeavesAPartialOnlyWhereNeeded) {
  EXPECT_TRUE(P::KeepsPartialOfRedundant(/*needs_partial=*/true, /*has_serialized_state=*/false));
  EXPECT_FALSE(P::KeepsPartialOfRedundant(true, true));
  EXPECT_FALSE(P::KeepsPartialOfRedundant(false, false));
}

}  // namespace
}  // namespace hearth::cache
