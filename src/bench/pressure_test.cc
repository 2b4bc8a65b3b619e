#include "bench/pressure.h"

#include <gtest/gtest.h>

#include <set>

#include "bench/text.h"

namespace hearth::bench {
namespace {

Workload PressureWorkload(int n, int tokens, int turns) {
  WorkloadSpec base;
  base.seed = 5;
  base.user_tokens = 60;
  base.max_tokens = 20;
  return MakeWorkload(PressureSpec(base, {n, tokens, turns}));
}

TEST(PressureTest, ConversationsHaveTheirOwnSystemPromptsAndGoRoundRobin) {
  const Workload w = PressureWorkload(5, 1800, 4);
  EXPECT_EQ(w.name, "pressure");
  ASSERT_EQ(w.sessions.size(), 5u);
  std::set<std::string> first_words;
  for (const SessionPlan& s : w.sessions) {
    ASSERT_EQ(s.turns.size(), 4u);
    first_words.insert(s.system.substr(0, s.system.find('.')));
  }
  EXPECT_EQ(first_words.size(), 5u);  // different from the first word on
  // One turn of each conversation in turn.
  ASSERT_EQ(w.order.size(), 20u);
  for (size_t i = 0; i < w.order.size(); ++i) {
    EXPECT_EQ(w.order[i], std::make_pair(static_cast<int>(i % 5), static_cast<int>(i / 5))) << i;
  }
  // Repetitions change the prompts, the same spec gives the same ones.
  WorkloadSpec base;
  base.seed = 5;
  WorkloadSpec rep1 = PressureSpec(base, {5, 1800, 4});
  rep1.rep = 1;
  EXPECT_NE(MakeWorkload(rep1).sessions[0].system, MakeWorkload(PressureSpec(base, {5, 1800, 4})).sessions[0].system);
  EXPECT_EQ(PressureWorkload(5, 1800, 4).sessions[3].system, w.sessions[3].system);
}

TEST(PressureTest, TheLengthGoesToTheSystemPrompt) {
  const Workload w = PressureWorkload(2, 3000, 4);
  for (const SessionPlan& s : w.sessions) {
    // 3000 - 4 × (60 + 20) = 2680 for the system prompt.
    EXPECT_NEAR(EstimateTokens(s.system), 2680, 0.1 * 2680);
    double total = EstimateTokens(s.system) + 4 * 20;
    for (const TurnPlan& t : s.turns) {
      const int n = EstimateTokens(t.added.at(0)["content"].get<std::string>());
      EXPECT_NEAR(n, 60, 25);  // short requests carry a fixed lead-in
      total += n;
    }
    EXPECT_NEAR(total, 3000, 0.1 * 3000);
  }
  // Too short for the turns: the system prompt keeps a floor.
  EXPECT_GE(EstimateTokens(PressureWorkload(2, 100, 4).sessions[0].system), 50);
}

TEST(PressureTest, ScenarioNameAndNotInAll) {
  auto parsed = ParseScenario("pressure");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Scenario::kPressure);
  for (Scenario s : AllScenarios()) EXPECT_NE(s, Scenario::kPressure);
  EXPECT_EQ(PressureName({8, 2400, 4}), "pressure-8x2400");
}

TurnRow Row(std::string server, int session, int turn, int prompt, std::optional<int> reused, int fresh,
            std::string tier = "") {
  TurnRow r;
  r.server = std::move(server);
  r.scenario = "pressure-2x1000";
  r.kind = "user";
  r.ok = true;
  r.session = session;
  r.turn = turn;
  r.prompt_tokens = prompt;
  r.reused_tokens = reused;
  r.new_tokens = fresh;
  r.completion_tokens = 20;
  r.reuse_tier = std::move(tier);
  return r;
}

TEST(PressureTest, TheLimitIsOnePointOhFiveTimesNew) {
  // 100 new: 105 prefilled passes, 106 does not.
  EXPECT_EQ(OverPressureLimit(Row("h", 0, 1, 1000, 895, 100)), false);
  EXPECT_EQ(OverPressureLimit(Row("h", 0, 1, 1000, 894, 100)), true);
  // First turns, failed and cut requests, and unknown counts are not judged.
  EXPECT_EQ(OverPressureLimit(Row("h", 0, 0, 1000, 0, 1000)), std::nullopt);
  TurnRow failed = Row("h", 0, 1, 1000, 0, 100);
  failed.ok = false;
  EXPECT_EQ(OverPressureLimit(failed), std::nullopt);
  TurnRow cut = Row("h", 0, 1, 1000, 0, 100);
  cut.interrupted = true;
  EXPECT_EQ(OverPressureLimit(cut), std::nullopt);
  EXPECT_EQ(OverPressureLimit(Row("h", 0, 1, 1000, std::nullopt, 100)), std::nullopt);
}

TEST(PressureTest, ReuseSources) {
  EXPECT_EQ(ReuseSource(Row("h", 0, 1, 1000, 900, 100, "ram")), "ram");
  EXPECT_EQ(ReuseSource(Row("h", 0, 1, 1000, 0, 100)), "none");
  EXPECT_EQ(ReuseSource(Row("l", 0, 1, 1000, 900, 100)), "unreported");
  EXPECT_EQ(ReuseSource(Row("l", 0, 1, 1000, std::nullopt, 100)), "unknown");
}

TEST(PressureTest, SummaryOfAPoint) {
  std::vector<TurnRow> rows = {
      Row("h", 0, 0, 500, 0, 500),              // first turns: working set only
      Row("h", 1, 0, 520, 0, 520),
      Row("h", 0, 1, 600, 500, 100, "device"),  // 100 / 100
      Row("h", 1, 1, 610, 0, 90),               // 610 / 90: flagged, nothing reused
      Row("h", 0, 2, 700, 520, 100, "disk"),    // 180 / 100: flagged
      Row("h", 1, 2, 720, 630, 90, "ram"),      // 90 / 90
      Row("l", 0, 1, 600, 500, 100),            // another server
  };
  rows.push_back(Row("h", 1, 3, 800, 0, 80));
  rows.back().ok = false;
  rows.push_back(Row("h", 0, 1, 600, 0, 100));
  rows.back().scenario = "pressure-4x1000";  // another point
  const std::vector<PressurePoint> points = SummarizePressure(rows, {{2, 1000, 4}}, {"h", "l", "absent"}, 1000);
  ASSERT_EQ(points.size(), 2u);
  const PressurePoint& h = points[0];
  EXPECT_EQ(h.server, "h");
  EXPECT_EQ(h.n_follow_ups, 4);
  EXPECT_EQ(h.n_over, 2);
  EXPECT_EQ(h.n_failed, 1);
  EXPECT_EQ(h.n_prefilled, 100 + 610 + 180 + 90);
  EXPECT_EQ(h.n_new, 100 + 90 + 100 + 90);
  ASSERT_TRUE(h.ratio.has_value());
  EXPECT_DOUBLE_EQ(*h.ratio, 980.0 / 380.0);
  // Each conversation's longest prompt and its reply: (700 + 20) + (720 + 20).
  EXPECT_EQ(h.working_set_tokens, 1460);
  ASSERT_TRUE(h.pressure.has_value());
  EXPECT_DOUBLE_EQ(*h.pressure, 1.46);
  EXPECT_EQ(h.sources, (std::map<std::string, int>{{"device", 1}, {"disk", 1}, {"none", 1}, {"ram", 1}}));
  EXPECT_EQ(points[1].server, "l");
  EXPECT_EQ(points[1].sources, (std::map<std::string, int>{{"unreported", 1}}));
  // Without the device cells there is no pressure figure.
  EXPECT_FALSE(SummarizePressure(rows, {{2, 1000, 4}}, {"h"}, std::nullopt)[0].pressure.has_value());
}

TEST(PressureTest, MarkdownNamesTheFlaggedFollowUpsAndWhyReuseStopped) {
  std::vector<TurnRow> rows = {Row("h", 0, 1, 600, 500, 100, "device"), Row("h", 1, 1, 610, 0, 90)};
  rows[1].reuse_stopped = "the state was evicted";
  const auto points = SummarizePressure(rows, {{2, 1000, 4}}, {"h"}, 1000);
  const std::string md = PressureMarkdown(points, rows, 1000, /*follow_ups=*/true);
  EXPECT_NE(md.find("| h | 2 | 1000 | 4 | 1250 | 1.25 | 3.74 | 1/2 | device 1, none 1 | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| h | pressure-2x1000 | 1 | 2 | 610 | 0 | 610 | 90 | 6.78 | none | the state was evicted |"),
            std::string::npos)
      << md;
  EXPECT_EQ(PressureMarkdown(points, rows, 1000, false).find("Flagged"), std::string::npos);
}

}  // namespace
}  // namespace hearth::bench
