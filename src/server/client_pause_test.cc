#include "server/client_pause.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hearth::server {
namespace {

using Clock = ClientPause::Clock;
using std::chrono::milliseconds;

std::vector<engine::Token> Conversation(int n, int first = 0) {
  std::vector<engine::Token> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// `turn`: its reply ends, and `after` later its next request adds a user message.
void UserTurnAfter(ClientPause& p, const std::vector<engine::Token>& turn, Clock::time_point at, milliseconds after) {
  p.ReplyEnded("ns", turn, turn.size(), at);
  std::vector<engine::Token> next = turn;
  next.push_back(9999);
  p.RequestArrived("ns", next, /*adds_user_message=*/true, at + after);
}

// 64-token prefill steps at 10 ms a token: 640 tokens take 6.4 s, 9.6 s with the
// margin, 9.9 s with the slack.
void SeeBackgroundSpeed(ClientPause& p) { p.PrefillStep(64, milliseconds(640)); }

TEST(ClientPauseTest, APauseHoldsWhatWarmAheadPrefillsInItOnceSeenEnoughTimes) {
  ClientPause p;
  const auto t0 = Clock::now();
  SeeBackgroundSpeed(p);
  EXPECT_FALSE(p.HoldsPrefill("ns", 640)) << "no pause seen yet";
  for (size_t i = 0; i < ClientPause::kPausesKept; ++i) {
    EXPECT_FALSE(p.HoldsPrefill("ns", 640)) << "only " << i << " pauses seen";
    UserTurnAfter(p, Conversation(100 + static_cast<int>(i) * 10), t0 + std::chrono::seconds(60 * i), milliseconds(12'000));
  }
  EXPECT_TRUE(p.HoldsPrefill("ns", 640));
  EXPECT_FALSE(p.HoldsPrefill("ns", 1280)) << "twice the tokens need 19.5 s";
  EXPECT_FALSE(p.HoldsPrefill("other", 640)) << "another namespace's clients are not these";
}

TEST(ClientPauseTest, NothingIsHeldWithoutTheEnginesSpeed) {
  ClientPause p;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < ClientPause::kPausesKept; ++i) {
    UserTurnAfter(p, Conversation(100 + static_cast<int>(i)), t0 + std::chrono::seconds(60 * i), milliseconds(60'000));
  }
  EXPECT_FALSE(p.HoldsPrefill("ns", 64));
  SeeBackgroundSpeed(p);
  EXPECT_TRUE(p.HoldsPrefill("ns", 64));
}

// The shortest recent pause decides, and the slowest recent step.
TEST(ClientPauseTest, TheShortestPauseAndTheSlowestStepDecide) {
  ClientPause p;
  const auto t0 = Clock::now();
  SeeBackgroundSpeed(p);
  UserTurnAfter(p, Conversation(100), t0, milliseconds(30'000));
  UserTurnAfter(p, Conversation(200), t0 + std::chrono::seconds(60), milliseconds(500));
  for (size_t i = 2; i < ClientPause::kPausesKept; ++i) {
    UserTurnAfter(p, Conversation(300 + static_cast<int>(i)), t0 + std::chrono::seconds(60 * i), milliseconds(30'000));
  }
  EXPECT_FALSE(p.HoldsPrefill("ns", 640)) << "one client answered within half a second";
  for (size_t i = 0; i < ClientPause::kPausesKept; ++i) {
    UserTurnAfter(p, Conversation(400 + static_cast<int>(i)), t0 + std::chrono::seconds(600 + 60 * i), milliseconds(12'000));
  }
  EXPECT_TRUE(p.HoldsPrefill("ns", 640)) << "the quick answer is no longer among the last";
  p.PrefillStep(64, milliseconds(1280));  // the machine got busy: 20 ms a token
  EXPECT_FALSE(p.HoldsPrefill("ns", 640));
}

// Tool results sent at once are not a person's pause, and a request that does not
// continue a recorded reply (another conversation, or one that left it before its fork)
// measures nothing.
TEST(ClientPauseTest, OnlyUserTurnsContinuingARecordedReplyArePauses) {
  ClientPause p;
  const auto t0 = Clock::now();
  SeeBackgroundSpeed(p);
  for (size_t i = 0; i < ClientPause::kPausesKept; ++i) {
    UserTurnAfter(p, Conversation(100 + static_cast<int>(i)), t0 + std::chrono::seconds(60 * i), milliseconds(20'000));
  }
  ASSERT_TRUE(p.HoldsPrefill("ns", 640));

  const auto turn = Conversation(500);
  const auto t1 = t0 + std::chrono::seconds(3600);
  p.ReplyEnded("ns", turn, turn.size(), t1);
  p.RequestArrived("ns", Conversation(600, 7), /*adds_user_message=*/true, t1 + milliseconds(1));  // another conversation
  p.RequestArrived("other", turn, /*adds_user_message=*/true, t1 + milliseconds(1));           // another namespace
  p.RequestArrived("ns", turn, /*adds_user_message=*/false, t1 + milliseconds(1));             // tool results
  EXPECT_TRUE(p.HoldsPrefill("ns", 640)) << "none of those was a quick user turn";
  p.RequestArrived("ns", turn, /*adds_user_message=*/true, t1 + milliseconds(2));
  EXPECT_TRUE(p.HoldsPrefill("ns", 640)) << "the reply was taken by the tool results (invariant 2)";

  // A reply with another in its place (an agent's scripted call) still continues the
  // conversation up to the fork.
  std::vector<engine::Token> prompt = Conversation(700);
  const size_t fork = 650;
  p.ReplyEnded("ns", prompt, fork, t1);
  std::vector<engine::Token> edited(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(fork));
  edited.push_back(-5);
  p.RequestArrived("ns", edited, /*adds_user_message=*/true, t1 + milliseconds(100));
  EXPECT_FALSE(p.HoldsPrefill("ns", 640)) << "a user turn 100 ms after the reply";
}

}  // namespace
}  // namespace hearth::server
