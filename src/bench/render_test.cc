#include "bench/render.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "bench/results.h"

namespace hearth::bench {
namespace {

// A ChatML renderer and a tokenizer that counts whitespace-separated words, with each
// control tag a token of its own: small enough to count by hand.
class FakeBackend : public RenderBackend {
 public:
  bool ignore_add_generation_prompt = false;
  // Like Qwen3.5: an assistant message's "<think> ... </think> " block is dropped once
  // a user message follows it.
  bool drop_earlier_thinking = false;
  int renders = 0;

  StatusOr<std::string> ApplyTemplate(const Json& body) override {
    ++renders;
    std::string out;
    const auto& ms = body["messages"];
    for (size_t i = 0; i < ms.size(); ++i) {
      std::string content = ms[i]["content"];
      const bool user_follows = std::any_of(ms.begin() + static_cast<std::ptrdiff_t>(i) + 1, ms.end(),
                                            [](const Json& m) { return m["role"] == "user"; });
      if (drop_earlier_thinking && ms[i]["role"] == "assistant" && user_follows && content.starts_with("<think>")) {
        content = content.substr(content.find("</think> ") + 9);
      }
      out += "<|im_start|>" + ms[i]["role"].get<std::string>() + "\n" + content + "<|im_end|>\n";
    }
    if (body.value("add_generation_prompt", true) || ignore_add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
  StatusOr<int> CountTokens(const std::string& text) override {
    std::string spaced;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 12, "<|im_start|>") == 0) {
        spaced += " T ";
        i += 12;
      } else if (text.compare(i, 10, "<|im_end|>") == 0) {
        spaced += " T ";
        i += 10;
      } else {
        spaced += text[i++];
      }
    }
    std::istringstream in(spaced);
    int n = 0;
    for (std::string w; in >> w;) ++n;
    return n;
  }
};

Json Msg(const char* role, const char* content) { return Json{{"role", role}, {"content", content}}; }

// system "You are terse."     T system You are terse. T    = 6 tokens
// user "Hi there"             T user Hi there T            = 5
// assistant "Hello."          T assistant Hello. T         = 4
// user "How are you"          T user How are you T         = 6
// generation prompt           T assistant                  = 2
TEST(NewTokensTest, CannedConversation) {
  FakeBackend fake;
  NewTokenCounter counter(&fake);
  ASSERT_TRUE(counter.Probe().ok());
  EXPECT_TRUE(counter.honours_add_generation_prompt());
  EXPECT_FALSE(counter.continues_final_assistant());

  const std::vector<Json> turn1 = {Msg("system", "You are terse."), Msg("user", "Hi there")};
  auto t1 = counter.Count(turn1, Json::array(), std::nullopt, 0);
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(t1->n_prompt, 13);
  EXPECT_EQ(t1->n_carried, 0);
  EXPECT_EQ(t1->n_new, 13);  // a first turn is all new

  // Turn 2 carries the system prompt, the first question and the reply as sent back (k=3):
  // new = 23 - 15 = the added user message (6) and the generation prompt (2).
  const std::vector<Json> turn2 = {turn1[0], turn1[1], Msg("assistant", "Hello."), Msg("user", "How are you")};
  auto t2 = counter.Count(turn2, Json::array(), std::nullopt, 3);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->n_prompt, 23);
  EXPECT_EQ(t2->n_carried, 15);
  EXPECT_EQ(t2->n_new, 8);
  EXPECT_NE(t2->prompt_text.find("How are you"), std::string::npos);
}

// A carried reply the template renders shorter once the next user message follows: the
// dropped reasoning is not new, and the added message still counts whole.
TEST(NewTokensTest, CarriedMessagesRenderedShorterInTheRequest) {
  FakeBackend fake;
  fake.drop_earlier_thinking = true;
  NewTokenCounter counter(&fake);
  const std::vector<Json> turn2 = {Msg("system", "You are terse."), Msg("user", "Hi there"),
                                   Msg("assistant", "<think> they greet me </think> Hello."),
                                   Msg("user", "How are you")};
  auto t2 = counter.Count(turn2, Json::array(), std::nullopt, 3);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->n_prompt, 23);
  EXPECT_EQ(t2->n_carried, 15);  // as rendered in the request, not the 20 of its own rendering
  EXPECT_EQ(t2->n_new, 8);
  EXPECT_EQ(CarriedEnd("abcdefXYZ0123456789<end>\nmore", "abcdefTHINK0123456789<end>\n"), 25u);
  EXPECT_EQ(CarriedEnd("abc<end>\nmore", "abc<end>\n"), 9u);
  // A reply whose content is empty and whose think scaffold the request drops.
  EXPECT_EQ(CarriedEnd("<im>assistant\n<|im_end|>\n<im>user\nQ<|im_end|>\n",
                       "<im>assistant\n<think>\n\n</think>\n\n<|im_end|>\n"),
            25u);
  EXPECT_FALSE(CarriedEnd("completely different text", "abcdefTHINK0123456789<end>\n").has_value());
}

TEST(NewTokensTest, ProbeNoticesARendererThatIgnoresTheFlag) {
  FakeBackend fake;
  fake.ignore_add_generation_prompt = true;
  NewTokenCounter counter(&fake);
  ASSERT_TRUE(counter.Probe().ok());
  EXPECT_FALSE(counter.honours_add_generation_prompt());
}

TEST(NewTokensTest, Arithmetic) {
  EXPECT_EQ(NewTokens(100, 0), 100);
  EXPECT_EQ(NewTokens(100, 70), 30);
  EXPECT_EQ(NewTokens(50, 70), 0);  // a template that shrinks history never gives negative
}

TEST(TargetTest, PrefilledWithinTwoPercentPlusEight) {
  EXPECT_TRUE(MeetsTarget(110, 100));
  EXPECT_TRUE(MeetsTarget(8, 0));
  EXPECT_FALSE(MeetsTarget(111, 100));
  TurnRow r;
  r.turn = 1;
  r.kind = "user";
  r.ok = true;
  r.prompt_tokens = 1000;
  r.reused_tokens = 800;
  r.new_tokens = 100;
  EXPECT_EQ(r.prefilled_tokens(), 200);
  EXPECT_DOUBLE_EQ(*r.prefill_ratio(), 2.0);
  EXPECT_EQ(r.target_met(), false);
  r.reused_tokens.reset();  // a server without cached-token counts
  EXPECT_FALSE(r.target_met().has_value());
  r.reused_tokens = 900;
  r.turn = 0;  // first turns are not judged
  EXPECT_FALSE(r.target_met().has_value());
}

// A successful user turn of server "s", scenario "chat".
TurnRow ChatTurn(int turn) {
  TurnRow r;
  r.server = "s";
  r.scenario = "chat";
  r.turn = turn;
  r.kind = "user";
  r.ok = true;
  return r;
}

TEST(SessionSummaryTest, SumsFollowUpsAndFindsTheFirstMiss) {
  std::vector<TurnRow> rows;
  for (int t = 0; t < 4; ++t) {
    TurnRow r = ChatTurn(t);
    r.prompt_tokens = 1000 + 100 * t;
    r.new_tokens = t == 0 ? 1000 : 100;
    r.reused_tokens = t == 2 ? 900 : 1000 + 100 * t - 100;  // turn 3 (index 2) prefills 200
    rows.push_back(r);
  }
  const auto sessions = SummarizeSessions(rows);
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].n_prefilled, 100 + 300 + 100);
  EXPECT_EQ(sessions[0].n_new, 300);
  EXPECT_EQ(sessions[0].first_missed_turn, 2);
}

// Three turns of one session: a cold first turn at 2 ms a token plus a 10 ms decode step,
// then follow-ups of 100 new tokens at 1x and 2x their ideal (210 = 100 x 2 + 10).
std::vector<TurnRow> ThreeTurnsAgainstTheirIdeal() {
  std::vector<TurnRow> rows;
  for (int t = 0; t < 3; ++t) {
    TurnRow r = ChatTurn(t);
    r.decode_tps = 100;  // 10 ms a step
    r.prompt_tokens = t == 0 ? 1000 : 1000 + 100 * t;
    r.reused_tokens = t == 0 ? 0 : 1000 + 100 * (t - 1);
    r.new_tokens = t == 0 ? 1000 : 100;
    r.ttft_ms = t == 0 ? 2010.0 : (t == 1 ? 210.0 : 420.0);  // cold: 2 ms a token
    rows.push_back(r);
  }
  return rows;
}

// Follow-up TTFT is judged against the session's own cold cost: its first turn gives
// the prefill time per token (TTFT less one decode step, over the prefilled tokens).
TEST(GroupSummaryTest, FollowUpTtftAgainstTheSessionsColdCost) {
  const auto groups = SummarizeGroups(ThreeTurnsAgainstTheirIdeal());
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_TRUE(groups[0].ttft_vs_ideal.has_value());
  EXPECT_EQ(groups[0].ttft_vs_ideal->n, 2);
  EXPECT_DOUBLE_EQ(groups[0].ttft_vs_ideal->min, 1.0);  // 210 = 100 × 2 + 10
  EXPECT_DOUBLE_EQ(groups[0].ttft_vs_ideal->max, 2.0);
}

// A server whose prefill costs a = 2 ms a token plus b = 0.001 ms a token per token before
// it (attention over what is cached), and a 10 ms decode step: a probe of 300 tokens from
// position 0, a first turn of 1,000, and follow-ups of 100 new tokens each taking exactly
// their cost where they sit. The flat ideal (the first turn's mean cost per token) calls
// them slow; at depth they are 1.0.
double PrefillMs(double n, double d) { return 2.0 * n + 0.001 * (n * d + n * n / 2); }

std::vector<TurnRow> FollowUpsAtTheirDepthCost(bool with_probe) {
  std::vector<TurnRow> rows;
  if (with_probe) {
    TurnRow p;
    p.server = "s";
    p.scenario = kDepthProbeScenario;
    p.kind = "cold";
    p.ok = true;
    p.prompt_tokens = 300;
    p.reused_tokens = 0;
    p.ttft_ms = PrefillMs(300, 0) + 10;
    rows.push_back(p);
  }
  for (int t = 0; t < 3; ++t) {
    TurnRow r = ChatTurn(t);
    r.decode_tps = 100;
    r.prompt_tokens = 1000 + 100 * t;
    r.reused_tokens = t == 0 ? 0 : 1000 + 100 * (t - 1);
    r.new_tokens = t == 0 ? 1000 : 100;
    r.ttft_ms = t == 0 ? PrefillMs(1000, 0) + 10 : PrefillMs(100, 900 + 100 * t) + 10;
    rows.push_back(r);
  }
  return rows;
}

TEST(GroupSummaryTest, FollowUpTtftAgainstItsCostAtDepth) {
  const auto groups = SummarizeGroups(FollowUpsAtTheirDepthCost(/*with_probe=*/true));
  ASSERT_EQ(groups.size(), 1u);  // the probe is in no group
  EXPECT_EQ(groups[0].n_turns, 3);
  ASSERT_TRUE(groups[0].ttft_vs_ideal_at_depth.has_value());
  EXPECT_EQ(groups[0].ttft_vs_ideal_at_depth->n, 2);
  EXPECT_NEAR(groups[0].ttft_vs_ideal_at_depth->min, 1.0, 1e-9);
  EXPECT_NEAR(groups[0].ttft_vs_ideal_at_depth->max, 1.0, 1e-9);
  ASSERT_TRUE(groups[0].ttft_vs_ideal.has_value());
  EXPECT_GT(groups[0].ttft_vs_ideal->min, 1.2);  // 315 ms against 100 × 2.5 + 10 = 260
  EXPECT_EQ(GroupToJson(groups[0])["ttft_vs_ideal_at_depth"]["n"], 2);
}

TEST(GroupSummaryTest, NoIdealAtDepthWithoutAProbeOrFromACachedOne) {
  const auto without = SummarizeGroups(FollowUpsAtTheirDepthCost(/*with_probe=*/false));
  ASSERT_EQ(without.size(), 1u);
  EXPECT_FALSE(without[0].ttft_vs_ideal_at_depth.has_value());
  EXPECT_TRUE(GroupToJson(without[0])["ttft_vs_ideal_at_depth"].is_null());
  auto rows = FollowUpsAtTheirDepthCost(/*with_probe=*/true);
  rows[0].reused_tokens = 250;  // a rerun's probe the server had cached: 50 tokens prefilled
  rows[0].ttft_ms = PrefillMs(50, 250) + 10;
  EXPECT_FALSE(SummarizeGroups(rows)[0].ttft_vs_ideal_at_depth.has_value());
}

// Two probes, one of them slowed by a busy moment of the machine: the faster one gives the
// cost, in either order.
TEST(GroupSummaryTest, OfTwoProbesTheFasterOneGivesTheCost) {
  for (bool slow_first : {true, false}) {
    SCOPED_TRACE(slow_first);
    auto rows = FollowUpsAtTheirDepthCost(/*with_probe=*/true);
    TurnRow slow = rows[0];
    slow.ttft_ms = 2 * *slow.ttft_ms;
    rows.insert(slow_first ? rows.begin() : rows.end(), slow);
    const auto groups = SummarizeGroups(rows);
    ASSERT_EQ(groups.size(), 1u);
    ASSERT_TRUE(groups[0].ttft_vs_ideal_at_depth.has_value());
    EXPECT_NEAR(groups[0].ttft_vs_ideal_at_depth->min, 1.0, 1e-9);
    EXPECT_NEAR(groups[0].ttft_vs_ideal_at_depth->max, 1.0, 1e-9);
  }
}

// A first turn not three times the probe's length cannot tell the cost at depth 0 from
// its growth (a few percent of noise would move b anywhere): no ideal at depth.
TEST(GroupSummaryTest, NoIdealAtDepthFromAProbeAsLongAsTheFirstTurn) {
  auto rows = FollowUpsAtTheirDepthCost(/*with_probe=*/true);
  rows[0].prompt_tokens = 400;
  rows[0].ttft_ms = PrefillMs(400, 0) + 10;
  EXPECT_FALSE(SummarizeGroups(rows)[0].ttft_vs_ideal_at_depth.has_value());
  rows[0].prompt_tokens = 300;
  rows[0].ttft_ms = PrefillMs(300, 0) + 10;
  ASSERT_TRUE(SummarizeGroups(rows)[0].ttft_vs_ideal_at_depth.has_value());
  EXPECT_NEAR(SummarizeGroups(rows)[0].ttft_vs_ideal_at_depth->max, 1.0, 1e-9);
}

// summary.json carries the same figures as numbers; a spread without samples is null.
TEST(GroupSummaryTest, JsonCarriesTheFiguresAndNullForNoSamples) {
  const auto groups = SummarizeGroups(ThreeTurnsAgainstTheirIdeal());
  ASSERT_EQ(groups.size(), 1u);
  const Json j = GroupToJson(groups[0]);
  EXPECT_EQ(j["server"], groups[0].server);
  EXPECT_EQ(j["scenario"], groups[0].scenario);
  EXPECT_EQ(j["turns"], 3);
  EXPECT_EQ(j["errors"], 0);
  EXPECT_EQ(j["ttft_vs_ideal"]["n"], 2);
  EXPECT_DOUBLE_EQ(j["ttft_vs_ideal"]["max"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["ttft_first_ms"]["p50"].get<double>(), 2010.0);
  EXPECT_DOUBLE_EQ(j["decode_tps"]["p50"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(j["session_prefilled_per_new"].get<double>(), 1.0);  // 100 prefilled for 100 new, twice

  GroupSummary empty{"s", "chat"};
  const Json e = GroupToJson(empty);
  EXPECT_TRUE(e["ttft_vs_ideal"].is_null());
  EXPECT_TRUE(e["decode_tps"].is_null());
  EXPECT_TRUE(e["session_prefilled_per_new"].is_null());
}

TEST(DiffTest, FirstDifferenceAndPrefix) {
  PromptDiff d = DiffPrompts("<|im_start|>assistant\n<think>\n\n</think>\n\nHello", "<|im_start|>assistant\nHello<|im_end|>");
  EXPECT_FALSE(d.prev_is_prefix);
  EXPECT_EQ(d.offset, 22u);
  EXPECT_EQ(d.context, "<|im_start|>assistant\n");
  EXPECT_TRUE(d.prev_text.starts_with("<think>"));
  EXPECT_TRUE(d.next_text.starts_with("Hello"));
  d = DiffPrompts("abc", "abcdef");
  EXPECT_TRUE(d.prev_is_prefix);
  EXPECT_EQ(d.next_text, "def");
  // Never splits a UTF-8 character.
  d = DiffPrompts("caf\xC3\xA9", "caf\xC3\xA8");
  EXPECT_EQ(d.offset, 3u);
  EXPECT_EQ(EscapeForLine("a\nb|c"), "a\\nb\\|c");
}

}  // namespace
}  // namespace hearth::bench
