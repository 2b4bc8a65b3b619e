#include "engine/argmax.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HEARTH_ARGMAX_AVX2 1
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

}  // namespace

namespace argmax_internal {

Token Portable(std::span<const float> values) { return LaneArgmax<16>(values); }

#ifdef HEARTH_ARGMAX_AVX2
bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
__attribute__((target("avx2"))) Token Avx2(std::span<const float> values) { return LaneArgmax<8>(values); }
#else
bool HaveAvx2() { return false; }
Token Avx2(std::span<const float>) { std::abort(); }  // REQUIRES HaveAvx2()
#endif

}  // namespace argmax_internal

Token FirstArgmax(std::span<const float> values) {
  return argmax_internal::HaveAvx2() ? argmax_internal::Avx2(values) : argmax_internal::Portable(values);
}

}  // namespace hearth::engine
