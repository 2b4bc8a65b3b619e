#include "bench/side_by_side.h"

#include <gtest/gtest.h>

#include <regex>

namespace hearth::bench {
namespace {

TurnRow Row(const std::string& server, int turn, const std::string& kind, int prompt, int reused, int n_new,
            double ttft) {
  TurnRow r;
  r.server = server;
  r.scenario = "agent";
  r.turn = turn;
  r.kind = kind;
  r.ok = true;
  r.prompt_tokens = prompt;
  r.reused_tokens = reused;
  r.new_tokens = n_new;
  r.ttft_ms = ttft;
  return r;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SideBySideTest, OneLinePerTurnWithEachServersPrefilledAndTtft) {
  std::vector<TurnRow> rows = {
      Row("hearth", 0, "user", 2000, 0, 2000, 9000),
      Row("hearth", 1, "tool", 2300, 2010, 290, 1500),
      Row("llama-server", 0, "user", 2000, 0, 2000, 8800),
      Row("llama-server", 1, "tool", 2304, 0, 290, 10500),
  };
  TurnRow failed = Row("llama-server", 2, "tool", 2650, 0, 350, 700);  // a stream error after 700 ms
  failed.ok = false;
  failed.reused_tokens.reset();
  rows.push_back(Row("hearth", 2, "tool", 2650, 2300, 350, 1000));
  rows.push_back(failed);
  TurnRow sweep = Row("hearth", 0, "cold", 512, 0, 512, 40);
  sweep.scenario = "sweep";
  rows.push_back(sweep);
  const std::string table = SideBySideTable(rows, {"hearth", "llama-server"});
  EXPECT_NE(table.find("| turn | kind | prompt | new | hearth prefilled | hearth TTFT ms | llama-server prefilled | "
                       "llama-server TTFT ms |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 1 | user | 2000 | 2000 | 2000 | 9000 | 2000 | 8800 |"), std::string::npos) << table;
  // The replies differed, so the prompts did: both are shown.
  EXPECT_NE(table.find("| 2 | tool | 2300 / 2304 | 290 | 290 | 1500 | 2304 | 10500 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| 3 | tool | 2650 | 350 | 350 | 1000 | ? | error |"), std::string::npos) << table;
  // Sums over what each server answered: the failed turn's time is not a time to first token.
  EXPECT_NE(table.find("| all | | | 2640 | 2640 | 11500 | 4304 | 19300 |"), std::string::npos) << table;
  EXPECT_EQ(table.find("cold"), std::string::npos) << "sweep rows are not sessions";
  EXPECT_EQ(SideBySideTable({sweep}, {"hearth"}), "");
}

TEST(SideBySideTest, SeriesTakeEachServersOkTurnsOfTheScenario) {
  std::vector<TurnRow> rows = {Row("hearth", 0, "user", 2000, 0, 2000, 9000), Row("b", 0, "user", 2000, 0, 2000, 1)};
  TurnRow failed = Row("hearth", 1, "tool", 2300, 0, 300, 5);
  failed.ok = false;
  rows.push_back(failed);
  TurnRow other = Row("hearth", 0, "user", 300, 0, 300, 5);
  other.scenario = "chat";
  rows.push_back(other);
  const std::vector<PlotSeries> series = TtftSeries(rows, {"hearth", "b"}, "agent");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].title, "hearth");
  ASSERT_EQ(series[0].xy.size(), 1u);
  EXPECT_EQ(series[0].xy[0], std::make_pair(2000.0, 9000.0));
  EXPECT_EQ(series[1].xy.size(), 1u);
}

TEST(SideBySideTest, LogLogSvgDrawsOneLinePerSeriesOnLogAxes) {
  const std::string svg = LogLogSvg("TTFT", "prompt tokens", "ms",
                                    {{"flat", {{4000, 500}, {1000, 500}, {2000, 0}}},  // y = 0 has no place
                                     {"grows", {{1000, 1000}, {4000, 20000}}},
                                     {"empty", {}}});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg;
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_EQ(Count(svg, "<circle"), 4);
  EXPECT_EQ(svg.find(">empty<"), std::string::npos) << "a series without points has no legend entry";
  // Gridlines labelled at 1, 2, 5 × powers of ten: x spans 1000-4000, y 500-20000 ms;
  // x spans less than a decade, so every multiple gets a line (3000 too).
  for (const char* label : {">1000<", ">2000<", ">3000<", ">500<", ">10000<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  // Log scale: 1000 -> 2000 tokens is as far as 2000 -> 4000; the flat line has one y.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("points=\"([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+)\"")));
  EXPECT_EQ(m[2].str(), m[4].str());
  ASSERT_TRUE(std::regex_search(svg, m,
                                std::regex("cx=\"([0-9.]+)\"[^>]*><title>1000, 1000<[\\s\\S]*cx=\"([0-9.]+)\"[^>]*><title>"
                                           "4000, 20000<")));
  const double x1000 = std::stod(m[1].str()), x4000 = std::stod(m[2].str());
  std::smatch tick;
  ASSERT_TRUE(std::regex_search(svg, tick, std::regex("<text x=\"([0-9.]+)\"[^>]*>2000</text>")));
  EXPECT_NEAR(std::stod(tick[1].str()), (x1000 + x4000) / 2, 0.2);
  EXPECT_EQ(LogLogSvg("t", "x", "y", {{"zero", {{0, 1}, {1, 0}}}}), "");
  EXPECT_NE(LogLogSvg("a < b & c", "x", "y", {{"s", {{1, 1}}}}).find("a &lt; b &amp; c"), std::string::npos);
}

}  // namespace
}  // namespace hearth::bench
