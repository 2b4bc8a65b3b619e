#include "engine/logit_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace hearth::engine {
namespace {

using Argmax = Token (*)(std::span<const float>);

Token FirstMaxElement(std::span<const float> v) {
  return static_cast<Token>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Every build this machine can run, by name.
std::vector<std::pair<const char*, Argmax>> ArgmaxBuilds() {
  std::vector<std::pair<const char*, Argmax>> builds = {{"FirstArgmax", FirstArgmax},
                                                         {"Portable", logit_scan_internal::FirstArgmaxPortable}};
  if (logit_scan_internal::HaveAvx2()) builds.emplace_back("Avx2", logit_scan_internal::FirstArgmaxAvx2);
  return builds;
}

using Above = size_t (*)(std::span<const float>, size_t, float);

std::vector<std::pair<const char*, Above>> AboveBuilds() {
  std::vector<std::pair<const char*, Above>> builds = {{"FirstAbove", FirstAbove},
                                                        {"Portable", logit_scan_internal::FirstAbovePortable}};
  if (logit_scan_internal::HaveAvx2()) builds.emplace_back("Avx2", logit_scan_internal::FirstAboveAvx2);
  return builds;
}

size_t ReferenceFirstAbove(std::span<const float> v, size_t from, float threshold) {
  for (size_t i = from; i < v.size(); ++i) {
    if (v[i] > threshold) return i;
  }
  return v.size();
}

TEST(LogitScanTest, ArgmaxPicksTheFirstLargestValueAtEverySizeAndPlace) {
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
        for (const auto& [name, argmax] : ArgmaxBuilds()) {
          ASSERT_EQ(argmax(w), FirstMaxElement(w)) << name << " n=" << n << " at=" << at << " tie=" << tie;
        }
      }
    }
  }
}

TEST(LogitScanTest, ArgmaxTiesInEveryLaneGoToTheLowestIndex) {
  // All values equal, then all equal but one larger at a place each lane sees: the
  // cross-lane step must prefer the lowest index among lanes holding the maximum.
  for (size_t n : {16u, 40u, 1024u, 1037u}) {
    std::vector<float> flat(n, -3.0f);
    for (const auto& [name, argmax] : ArgmaxBuilds()) EXPECT_EQ(argmax(flat), 0) << name << " n=" << n;
    for (size_t at = 0; at < 40 && at < n; ++at) {
      std::vector<float> w = flat;
      for (size_t k = at; k < n; k += 8) w[k] = 5.0f;  // one index per lane of eight
      for (const auto& [name, argmax] : ArgmaxBuilds()) {
        EXPECT_EQ(argmax(w), static_cast<Token>(at)) << name << " n=" << n << " at=" << at;
      }
    }
  }
}

TEST(LogitScanTest, ArgmaxHandlesInfinitiesAndTheLowestFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  const float lowest = std::numeric_limits<float>::lowest();
  std::vector<float> v(300, -inf);
  for (const auto& [name, argmax] : ArgmaxBuilds()) EXPECT_EQ(argmax(v), 0) << name;
  v[123] = lowest;
  for (const auto& [name, argmax] : ArgmaxBuilds()) EXPECT_EQ(argmax(v), 123) << name;
  v[200] = inf;
  v[250] = inf;
  for (const auto& [name, argmax] : ArgmaxBuilds()) EXPECT_EQ(argmax(v), 200) << name;
}

TEST(LogitScanTest, FirstAboveFindsTheFirstValueAboveFromEveryStart) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  // Sizes around the step widths (16, 32) and a vocabulary's; thresholds from "most values
  // are above" to "none is", so the scan ends in the first step, a later one, the tail,
  // or nowhere.
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 31u, 32u, 33u, 64u, 95u, 1000u, 248320u}) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    const size_t step = std::max<size_t>(1, n / 61);
    for (float threshold : {-10.0f, 0.0f, 2.0f, 3.5f, 10.0f}) {
      for (size_t from = 0; from <= n; from += step) {
        for (const auto& [name, above] : AboveBuilds()) {
          ASSERT_EQ(above(v, from, threshold), ReferenceFirstAbove(v, from, threshold))
              << name << " n=" << n << " from=" << from << " threshold=" << threshold;
        }
      }
    }
  }
}

TEST(LogitScanTest, FirstAboveIsStrictAndSkipsWhatEqualsTheThreshold) {
  std::vector<float> v(100, 1.0f);
  v[70] = 1.5f;
  for (const auto& [name, above] : AboveBuilds()) {
    EXPECT_EQ(above(v, 0, 1.0f), 70u) << name;   // equal is not above
    EXPECT_EQ(above(v, 71, 1.0f), 100u) << name;
    EXPECT_EQ(above(v, 0, 1.5f), 100u) << name;
    EXPECT_EQ(above(v, 0, 0.5f), 0u) << name;
    EXPECT_EQ(above(v, 100, -1.0f), 100u) << name;  // from the end: nothing
  }
}

}  // namespace
}  // namespace hearth::engine
