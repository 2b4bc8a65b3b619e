#include "bench/restart.h"

#include <gtest/gtest.h>

namespace hearth::bench {
namespace {

TurnRow Row(int session, int turn, int prompt, int reused, int fresh, std::string tier) {
  TurnRow r;
  r.server = "hearth";
  r.scenario = "restart";
  r.session = session;
  r.turn = turn;
  r.kind = "user";
  r.ok = true;
  r.prompt_tokens = prompt;
  r.reused_tokens = reused;
  r.new_tokens = fresh;
  r.reuse_tier = std::move(tier);
  return r;
}

// Two turns of each of three conversations, then each one's follow-up after the restart.
std::vector<TurnRow> Rows() {
  std::vector<TurnRow> rows;
  for (int s = 0; s < 3; ++s) rows.push_back(Row(s, 0, 900, 0, 900, ""));
  for (int s = 0; s < 3; ++s) rows.push_back(Row(s, 1, 1030, 900, 130, "ram"));
  rows.push_back(Row(0, kRestartTurn, 1160, 1030, 130, "disk"));      // kept, from disk
  rows.push_back(Row(1, kRestartTurn, 1160, 0, 130, ""));             // lost: prefilled everything
  rows.push_back(Row(2, kRestartTurn, 1160, 1024, 130, "disk"));      // 136 for 130: within 1.05
  return rows;
}

TEST(RestartTest, JudgesEachConversationsFollowUpAfterTheRestart) {
  const RestartSummary s = SummarizeRestart(Rows(), "restart");
  ASSERT_EQ(s.conversations.size(), 3u);
  EXPECT_EQ(s.n_judged, 3);
  EXPECT_EQ(s.n_kept, 2);
  EXPECT_EQ(s.n_failed, 0);
  EXPECT_EQ(s.conversations[0].kept, std::optional<bool>(true));
  EXPECT_EQ(s.conversations[1].kept, std::optional<bool>(false));
  EXPECT_EQ(s.conversations[1].source, "none");
  EXPECT_EQ(s.conversations[1].prefilled_tokens, std::optional<int>(1160));
  EXPECT_EQ(s.conversations[2].kept, std::optional<bool>(true));
  // The turn before the restart is reported beside it.
  ASSERT_TRUE(s.conversations[0].before_ratio.has_value());
  EXPECT_DOUBLE_EQ(*s.conversations[0].before_ratio, 1.0);
  ASSERT_TRUE(s.ratio.has_value());
  EXPECT_DOUBLE_EQ(*s.ratio, (130.0 + 1160.0 + 136.0) / 390.0);
  EXPECT_EQ(RestartVerdictLine(s), "restart kept 2 of 3 conversations (reuse from disk 2, none 1)");
}

TEST(RestartTest, AFailedFollowUpIsNotKept) {
  std::vector<TurnRow> rows = Rows();
  rows.back().ok = false;
  rows.back().reused_tokens.reset();
  rows.push_back(Row(0, 0, 50, 0, 50, ""));
  rows.back().scenario = "baseline";  // another probe's rows are not counted
  const RestartSummary s = SummarizeRestart(rows, "restart");
  ASSERT_EQ(s.conversations.size(), 3u);
  EXPECT_EQ(s.n_judged, 2);
  EXPECT_EQ(s.n_kept, 1);
  EXPECT_EQ(s.n_failed, 1);
  EXPECT_EQ(s.conversations[2].source, "failed");
  EXPECT_EQ(RestartVerdictLine(s), "restart kept 1 of 3 conversations (reuse from disk 1, none 1, 1 failed requests)");
  const std::string md = RestartMarkdown(s, "systemctl restart hearth");
  EXPECT_NE(md.find("`systemctl restart hearth`"), std::string::npos);
  EXPECT_NE(md.find("| 1 | 1 | 1160 | 0 | 1160 | 130 | 8.92 | none | no | - |"), std::string::npos) << md;
}

}  // namespace
}  // namespace hearth::bench
