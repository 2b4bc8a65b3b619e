#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace hearth::engine {
namespace {

TEST(StopStringsTest, PassesTextThroughWithoutStops) {
  StopStrings s({});
  EXPECT_EQ(s.Feed("hello").text, "hello");
  EXPECT_EQ(s.Flush(), "");
}

TEST(StopStringsTest, StopSplitAcrossPiecesIsNeverEmitted) {
  StopStrings s({"</stop>"});
  std::string out, matched;
  for (const char* piece : {"abc</", "st", "op>tail"}) {
    auto r = s.Feed(piece);
    out += r.text;
    matched = r.matched;
    if (r.stopped) break;
  }
  EXPECT_EQ(matched, "</stop>");
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(s.Feed("more").text, "");
}

TEST(StopStringsTest, FalseStartIsReleased) {
  StopStrings s({"STOP"});
  auto r1 = s.Feed("ab ST");
  EXPECT_EQ(r1.text, "ab ");
  auto r2 = s.Feed("ART");
  EXPECT_FALSE(r2.stopped);
  EXPECT_EQ(r2.text, "START");
  auto r3 = s.Feed("xS");
  EXPECT_EQ(r3.text, "x");
  EXPECT_EQ(s.Flush(), "S");
}

TEST(StopStringsTest, EarliestOfSeveralWins) {
  StopStrings s({"world", "lo"});
  auto r = s.Feed("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hel");
  EXPECT_EQ(r.matched, "lo");
}

}  // namespace
}  // namespace hearth::engine
