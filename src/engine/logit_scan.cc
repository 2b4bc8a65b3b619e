#include "engine/logit_scan.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HEARTH_LOGIT_SCAN_AVX2 1
#include <immintrin.h>
#endif

namespace hearth::engine {
namespace {

// kLanes running maxima, one per lane: strictly greater replaces, so each lane keeps its
// first maximum; among lanes the largest value wins, and of equal ones the lowest index,
// so the result is the first maximum. kLanes is what suits the target: one AVX2 register
// (8), or four 4-wide ones.
template <size_t kLanes>
[[gnu::always_inline]] inline Token LaneArgmax(std::span<const float> values) {
  const size_t n = values.size();
  const float* x = values.data();
  if (n < 2 * kLanes) return static_cast<Token>(std::max_element(values.begin(), values.end()) - values.begin());
  float best[kLanes];
  int32_t at[kLanes];
  for (size_t j = 0; j < kLanes; ++j) {
    best[j] = x[j];
    at[j] = static_cast<int32_t>(j);
  }
  size_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const bool better = x[i + j] > best[j];
      best[j] = better ? x[i + j] : best[j];
      at[j] = better ? static_cast<int32_t>(i + j) : at[j];
    }
  }
  float top = best[0];
  int32_t top_at = at[0];
  for (size_t j = 1; j < kLanes; ++j) {
    if (best[j] > top || (best[j] == top && at[j] < top_at)) {
      top = best[j];
      top_at = at[j];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > top) {
      top = x[i];
      top_at = static_cast<int32_t>(i);
    }
  }
  return top_at;
}

size_t ScalarFirstAbove(const float* x, size_t i, size_t n, float threshold) {
  for (; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

}  // namespace

namespace logit_scan_internal {

Token FirstArgmaxPortable(std::span<const float> values) { return LaneArgmax<16>(values); }

// Blocks of 16 with no early exit inside one, which compilers vectorize (clang does; GCC
// 12 leaves the any-of scalar), then the block that holds one, value by value.
size_t FirstAbovePortable(std::span<const float> values, size_t from, float threshold) {
  constexpr size_t kBlock = 16;
  const float* x = values.data();
  const size_t n = values.size();
  size_t i = from;
  for (; i + kBlock <= n; i += kBlock) {
    bool any = false;
    for (size_t j = 0; j < kBlock; ++j) any |= x[i + j] > threshold;
    if (any) break;
  }
  return ScalarFirstAbove(x, i, n, threshold);
}

#ifdef HEARTH_LOGIT_SCAN_AVX2
bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

__attribute__((target("avx2"))) Token FirstArgmaxAvx2(std::span<const float> values) { return LaneArgmax<8>(values); }

// 32 values per step in four registers: compare (ordered: a NaN is never above), merge,
// and stop at the first step with any value above; that step's values one by one.
__attribute__((target("avx2"))) size_t FirstAboveAvx2(std::span<const float> values, size_t from, float threshold) {
  const float* x = values.data();
  const size_t n = values.size();
  const __m256 t = _mm256_set1_ps(threshold);
  size_t i = from;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ);
    const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), t, _CMP_GT_OQ);
    const __m256 c = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), t, _CMP_GT_OQ);
    const __m256 d = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), t, _CMP_GT_OQ);
    if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(a, b), _mm256_or_ps(c, d))) != 0) break;
  }
  return ScalarFirstAbove(x, i, n, threshold);
}
#else
bool HaveAvx2() { return false; }
Token FirstArgmaxAvx2(std::span<const float>) { std::abort(); }                 // REQUIRES HaveAvx2()
size_t FirstAboveAvx2(std::span<const float>, size_t, float) { std::abort(); }  // REQUIRES HaveAvx2()
#endif

}  // namespace logit_scan_internal

Token FirstArgmax(std::span<const float> values) {
  using namespace logit_scan_internal;
  return HaveAvx2() ? FirstArgmaxAvx2(values) : FirstArgmaxPortable(values);
}

size_t FirstAbove(std::span<const float> values, size_t from, float threshold) {
  using namespace logit_scan_internal;
  return HaveAvx2() ? FirstAboveAvx2(values, from, threshold) : FirstAbovePortable(values, from, threshold);
}

}  // namespace hearth::engine
