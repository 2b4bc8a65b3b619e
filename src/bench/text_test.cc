#include "bench/text.h"

#include <gtest/gtest.h>

#include "testing/test_env.h"

namespace hearth::bench {
namespace {

TEST(RngTest, SameSeedSameNumbers) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(RngTest, RangeStaysInBounds) {
  Rng r(7);
  for (int i = 0; i < 1000; ++i) {
    const int v = r.Range(-3, 5);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 5);
  }
  EXPECT_EQ(r.Range(4, 4), 4);
}

TEST(RngTest, MixSeedSeparatesStreams) {
  EXPECT_EQ(MixSeed(1, 2, 3, 4), MixSeed(1, 2, 3, 4));
  EXPECT_NE(MixSeed(1, 2, 3, 4), MixSeed(1, 2, 4, 3));
  EXPECT_NE(MixSeed(1, 0), MixSeed(2, 0));
}

TEST(TextTest, DeterministicFromSeed) {
  Rng a(9), b(9);
  EXPECT_EQ(Prose(a, 200), Prose(b, 200));
  EXPECT_EQ(Code(a, 200, true), Code(b, 200, true));
  EXPECT_EQ(UserRequest(a, 80), UserRequest(b, 80));
}

TEST(TextTest, EstimateCountsWordsAndPunctuation) {
  EXPECT_EQ(EstimateTokens(""), 0);
  EXPECT_EQ(EstimateTokens("the cache"), 2);
  EXPECT_EQ(EstimateTokens("a, b."), 4);
  EXPECT_EQ(EstimateTokens("snake_case"), 3);  // the underscore counts, and never stalls the scan
  EXPECT_EQ(EstimateTokens("    x"), 2);       // indentation is a token
}

// The sizes asked for hold against the real Qwen3.5 tokenizer, within 25%.
TEST(TextTest, SizesMatchTheRealTokenizer) {
  const engine::Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  Rng rng(3);
  for (int n : {60, 250, 1000, 4000}) {
    const std::string prose = Prose(rng, n), py = Code(rng, n, true), cc = Code(rng, n, false);
    for (const std::string* text : {&prose, &py, &cc}) {
      const double actual = static_cast<double>(m->Tokenize(*text, false, false).size());
      EXPECT_NEAR(actual, n, 0.25 * n + 10) << "asked " << n << " for: " << text->substr(0, 80);
    }
  }
}

}  // namespace
}  // namespace hearth::bench
