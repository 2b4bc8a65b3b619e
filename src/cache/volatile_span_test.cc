#include "cache/volatile_span.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hearth::cache {
namespace {

std::vector<Token> Seq(int n, Token from) {
  std::vector<Token> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(VolatileSpanTest, FindsAReplacedIdThatRejoins) {
  auto earlier = Seq(100, 0);
  auto prompt = earlier;
  // Tokens 10..13 were a request id; this time the id tokenizes to 6 other tokens.
  prompt.erase(prompt.begin() + 10, prompt.begin() + 14);
  prompt.insert(prompt.begin() + 10, {900, 901, 902, 903, 904, 905});
  auto span = FindVolatileSpan(prompt, earlier, 10);
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(span->start, 10);
  EXPECT_EQ(span->end_new, 16);
  EXPECT_EQ(span->end_earlier, 14);
}

TEST(VolatileSpanTest, ARealDivergenceDoesNotRejoin) {
  auto earlier = Seq(100, 0);
  auto prompt = Seq(10, 0);
  auto tail = Seq(90, 5000);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  EXPECT_FALSE(FindVolatileSpan(prompt, earlier, 10).has_value());
}

TEST(VolatileSpanTest, ShortRejoinsAreNotEnough) {
  auto earlier = Seq(30, 0);
  auto prompt = earlier;
  prompt[10] = 999;
  // Only 19 tokens follow the change: enough for the default 16.
  EXPECT_TRUE(FindVolatileSpan(prompt, earlier, 10).has_value());
  EXPECT_FALSE(FindVolatileSpan(prompt, earlier, 10, 64, 25).has_value());
}

}  // namespace
}  // namespace hearth::cache
