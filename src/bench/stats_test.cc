#include "bench/stats.h"

#include <gtest/gtest.h>

namespace hearth::bench {
namespace {

TEST(StatsTest, Percentiles) {
  EXPECT_FALSE(Percentile({}, 50).has_value());
  EXPECT_DOUBLE_EQ(*Percentile({5}, 90), 5);
  EXPECT_DOUBLE_EQ(*Percentile({4, 1, 3, 2}, 50), 2.5);  // order does not matter
  EXPECT_DOUBLE_EQ(*Percentile({1, 2, 3}, 50), 2);
  std::vector<double> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back(i);
  EXPECT_NEAR(*Percentile(ten, 90), 9.1, 1e-9);
  EXPECT_DOUBLE_EQ(*Percentile(ten, 0), 1);
  EXPECT_DOUBLE_EQ(*Percentile(ten, 100), 10);
}

TEST(StatsTest, Summary) {
  EXPECT_FALSE(Summarize(std::vector<double>{}).has_value());
  const Spread s = *Summarize({10, 30, 20, 40});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.p50, 25);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 40);
  EXPECT_DOUBLE_EQ(s.mean, 25);
  EXPECT_NEAR(s.p90, 37, 1e-9);
}

TEST(StatsTest, FormatNumber) {
  EXPECT_EQ(FormatNumber(1234.4), "1234");
  EXPECT_EQ(FormatNumber(12.34), "12.3");
  EXPECT_EQ(FormatNumber(1.234), "1.23");
  EXPECT_EQ(FormatNumber(0.01234), "0.012");
  EXPECT_EQ(FormatNumber(3), "3");
}

}  // namespace
}  // namespace hearth::bench
