#include "engine/argmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace hearth::engine {
namespace {

using Argmax = Token (*)(std::span<const float>);

Token FirstMaxElement(std::span<const float> v) {
  return static_cast<Token>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Every build of the loop this machine can run, by name.
std::vector<std::pair<const char*, Argmax>> Builds() {
  std::vector<std::pair<const char*, Argmax>> builds = {{"FirstArgmax", FirstArgmax},
                                                         {"Portable", argmax_internal::Portable}};
  if (argmax_internal::HaveAvx2()) builds.emplace_back("Avx2", argmax_internal::Avx2);
  return builds;
}

TEST(ArgmaxTest, PicksTheFirstLargestValueAtEverySizeAndPlace) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  // Sizes around the lane counts (8, 16) and their doubles, where the loop's head, body
  // and tail split, and one the size of Qwen3.5's vocabulary.
  for (size_t n : {1u, 2u, 7u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 47u, 48u, 63u, 100u, 1000u, 248320u}) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    // The largest value at each place in turn (every one of a small array, a sample of a
    // large one), once alone and once tied with two later copies of itself (halfway to the
    // end, and last).
    const size_t step = std::max<size_t>(1, n / 97);
    for (size_t at = 0; at < n; at += step) {
      for (bool tie : {false, true}) {
        std::vector<float> w = v;
        w[at] = 100.0f;
        if (tie) w[at + (n - 1 - at) / 2] = w[n - 1] = 100.0f;
        for (const auto& [name, argmax] : Builds()) {
          ASSERT_EQ(argmax(w), FirstMaxElement(w)) << name << " n=" << n << " at=" << at << " tie=" << tie;
        }
      }
    }
  }
}

TEST(ArgmaxTest, TiesInEveryLaneGoToTheLowestIndex) {
  // All values equal, then all equal but one larger at a place each lane sees: the
  // cross-lane step must prefer the lowest index among lanes holding the maximum.
  for (size_t n : {16u, 40u, 1024u, 1037u}) {
    std::vector<float> flat(n, -3.0f);
    for (const auto& [name, argmax] : Builds()) EXPECT_EQ(argmax(flat), 0) << name << " n=" << n;
    for (size_t at = 0; at < 40 && at < n; ++at) {
      std::vector<float> w = flat;
      for (size_t k = at; k < n; k += 8) w[k] = 5.0f;  // one index per lane of eight
      for (const auto& [name, argmax] : Builds()) {
        EXPECT_EQ(argmax(w), static_cast<Token>(at)) << name << " n=" << n << " at=" << at;
      }
    }
  }
}

TEST(ArgmaxTest, HandlesInfinitiesAndTheLowestFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  const float lowest = std::numeric_limits<float>::lowest();
  std::vector<float> v(300, -inf);
  for (const auto& [name, argmax] : Builds()) EXPECT_EQ(argmax(v), 0) << name;
  v[123] = lowest;
  for (const auto& [name, argmax] : Builds()) EXPECT_EQ(argmax(v), 123) << name;
  v[200] = inf;
  v[250] = inf;
  for (const auto& [name, argmax] : Builds()) EXPECT_EQ(argmax(v), 200) << name;
}

}  // namespace
}  // namespace hearth::engine
