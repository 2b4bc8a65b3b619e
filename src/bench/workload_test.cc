#include "bench/workload.h"

#include <gtest/gtest.h>

#include <set>

#include "bench/text.h"
#include "testing/test_env.h"

namespace hearth::bench {
namespace {

std::string Dump(const Workload& w) {
  Json j = Json::array();
  for (const SessionPlan& s : w.sessions) {
    Json turns = Json::array();
    for (const TurnPlan& t : s.turns) {
      turns.push_back({{"added", t.added},
                       {"system", t.system ? Json(*t.system) : Json(nullptr)},
                       {"reply", t.scripted_reply ? *t.scripted_reply : Json(nullptr)},
                       {"interrupt", t.interrupt}});
    }
    j.push_back({{"id", s.id}, {"system", s.system}, {"tools", s.tools}, {"turns", turns}});
  }
  return j.dump();
}

WorkloadSpec Spec(Scenario s) {
  WorkloadSpec spec;
  spec.scenario = s;
  spec.seed = 11;
  return spec;
}

TEST(WorkloadTest, SameSpecSameWorkload) {
  for (Scenario s : AllScenarios()) {
    EXPECT_EQ(Dump(MakeWorkload(Spec(s))), Dump(MakeWorkload(Spec(s)))) << ScenarioName(s);
  }
}

TEST(WorkloadTest, SeedRepAndNonceChangeTheContent) {
  WorkloadSpec a = Spec(Scenario::kChat), b = a, c = a, d = a;
  b.seed = 12;
  c.rep = 1;
  d.nonce = "abc123";
  const std::string wa = Dump(MakeWorkload(a));
  EXPECT_NE(wa, Dump(MakeWorkload(b)));
  EXPECT_NE(wa, Dump(MakeWorkload(c)));
  const Workload wd = MakeWorkload(d);
  EXPECT_TRUE(wd.sessions[0].turns[0].added[0]["content"].get<std::string>().starts_with("(run abc123)"));
  // Repetitions share the system prompt, as one client's sessions do.
  EXPECT_EQ(MakeWorkload(a).sessions[0].system, MakeWorkload(c).sessions[0].system);
}

TEST(WorkloadTest, ShapeAndOrder) {
  for (Scenario s : AllScenarios()) {
    WorkloadSpec spec = Spec(s);
    spec.n_turns = 9;
    const Workload w = MakeWorkload(spec);
    const size_t n_sessions = s == Scenario::kInterleaved ? 8 : 1;
    ASSERT_EQ(w.sessions.size(), n_sessions) << ScenarioName(s);
    EXPECT_EQ(w.order.size(), n_sessions * 9);
    std::set<std::pair<int, int>> seen(w.order.begin(), w.order.end());
    EXPECT_EQ(seen.size(), w.order.size());
    for (const SessionPlan& sp : w.sessions) {
      ASSERT_EQ(sp.turns.size(), 9u);
      EXPECT_EQ(sp.turns[0].added.at(0)["role"], "user");
      for (size_t t = 0; t < sp.turns.size(); ++t) {
        EXPECT_EQ(sp.turns[t].turn, static_cast<int>(t));
        EXPECT_FALSE(sp.turns[t].added.empty()) << ScenarioName(s) << " turn " << t;
      }
    }
  }
  // Interleaved: one turn of each conversation in turn.
  const Workload w = MakeWorkload(Spec(Scenario::kInterleaved));
  EXPECT_EQ(w.order[0], std::make_pair(0, 0));
  EXPECT_EQ(w.order[1], std::make_pair(1, 0));
  EXPECT_EQ(w.order[8], std::make_pair(0, 1));
}

TEST(WorkloadTest, EveryThirdReplyIsInterrupted) {
  const Workload w = MakeWorkload(Spec(Scenario::kInterrupt));
  std::vector<int> cut;
  for (const TurnPlan& t : w.sessions[0].turns) {
    if (t.interrupt) cut.push_back(t.turn);
  }
  EXPECT_EQ(cut, (std::vector<int>{2, 5}));
}

TEST(WorkloadTest, VolatileLineChangesEveryTurnAtTheTop) {
  const Workload w = MakeWorkload(Spec(Scenario::kVolatile));
  std::set<std::string> systems;
  for (const TurnPlan& t : w.sessions[0].turns) {
    ASSERT_TRUE(t.system.has_value());
    EXPECT_TRUE(t.system->starts_with("Request-Id: "));
    EXPECT_EQ(t.system->at(12 + 8), '-');  // a UUID
    EXPECT_EQ(t.system->at(12 + 14), '4');
    EXPECT_NE(t.system->find("Date: 20"), std::string::npos);
    systems.insert(*t.system);
  }
  EXPECT_EQ(systems.size(), w.sessions[0].turns.size());
}

TEST(WorkloadTest, AgentScriptsToolCallsAndResults) {
  const Workload w = MakeWorkload(Spec(Scenario::kAgent));
  const SessionPlan& s = w.sessions[0];
  ASSERT_GE(s.tools.size(), 5u);
  EXPECT_EQ(s.tools[0]["function"]["name"], "read_file");
  // user, tool, tool, tool, user, tool, tool, tool
  for (int t = 0; t < 8; ++t) {
    const TurnPlan& turn = s.turns[static_cast<size_t>(t)];
    EXPECT_EQ(turn.tool_results, t % 4 != 0) << t;
    EXPECT_EQ(turn.scripted_reply.has_value(), t % 4 != 3 && t < 7) << t;
    if (!turn.scripted_reply) continue;
    // Each call is answered, in order, by the next turn's tool results.
    const Json& calls = (*turn.scripted_reply)["tool_calls"];
    const std::vector<Json>& results = s.turns[static_cast<size_t>(t) + 1].added;
    ASSERT_EQ(calls.size(), results.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(results[i]["role"], "tool");
      EXPECT_EQ(results[i]["tool_call_id"], calls[i]["id"]);
      EXPECT_TRUE(Json::parse(calls[i]["function"]["arguments"].get<std::string>()).is_object());
    }
  }
}

TEST(WorkloadTest, MessagesAreSizedAsAsked) {
  const engine::Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  auto tokens = [&](const std::string& s) { return static_cast<double>(m->Tokenize(s, false, false).size()); };
  WorkloadSpec spec = Spec(Scenario::kChat);
  spec.user_tokens = 300;
  spec.system_tokens = 500;
  Workload w = MakeWorkload(spec);
  EXPECT_NEAR(tokens(w.sessions[0].system), 500, 0.25 * 500);
  for (const TurnPlan& t : w.sessions[0].turns) {
    EXPECT_NEAR(tokens(t.added[0]["content"].get<std::string>()), 300, 0.25 * 300);
  }
  // A context target spreads over the turns.
  spec.user_tokens = 100;
  spec.context_tokens = 6000;
  spec.max_tokens = 50;
  w = MakeWorkload(spec);
  double total = tokens(w.sessions[0].system) + spec.n_turns * spec.max_tokens;
  for (const TurnPlan& t : w.sessions[0].turns) total += tokens(t.added[0]["content"].get<std::string>());
  EXPECT_NEAR(total, 6000, 0.25 * 6000);
  // kGrow: each pasted document longer than the last.
  spec.scenario = Scenario::kGrow;
  w = MakeWorkload(spec);
  double last = 0;
  for (const TurnPlan& t : w.sessions[0].turns) {
    const double n = tokens(t.added[0]["content"].get<std::string>());
    EXPECT_GT(n, last);
    last = n;
  }
}

TEST(WorkloadTest, SweepPromptsStartWithANonce) {
  const SweepPrompt a = MakeSweepPrompt(1000, 1), b = MakeSweepPrompt(1000, 2);
  const std::string sa = a.messages[0]["content"], sb = b.messages[0]["content"];
  EXPECT_TRUE(sa.starts_with("Nonce "));
  EXPECT_NE(sa.substr(0, 20), sb.substr(0, 20));
  EXPECT_NEAR(EstimateTokens(sa), 1000, 100);
}

TEST(WorkloadTest, ScenarioNamesRoundTrip) {
  for (Scenario s : AllScenarios()) {
    auto parsed = ParseScenario(ScenarioName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseScenario("nope").ok());
}

}  // namespace
}  // namespace hearth::bench
