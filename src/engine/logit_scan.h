// Logit scans: the two passes over a whole vocabulary's logits that sampling makes per
// token per stream (248k logits, 1 MB, for Qwen3.5), on the engine thread while the
// backend's other threads wait; their speed is part of what concurrent streams reach
// (docs/benchmarks.md, "Concurrent streams").
//
//   FirstArgmax   the index of the first largest value, as llama.cpp's greedy sampler
//                 picks a token (greedy decoding).
//   FirstAbove    the first index at or after `from` whose value is above a threshold:
//                 how a top-k pass skips the logits that cannot enter its k best.
//
// Each has a portable build, written so that compilers turn it into vector code for the
// build's target (SSE2 on a generic x86-64 build, NEON on Apple silicon), and an AVX2
// build chosen at run time on an x86-64 CPU that has AVX2. On 248k logits here the AVX2
// builds take 24-52 us for the argmax (112-173 for SSE2) and about 25 us for a top-40
// pass's scans. logit_scan_test.cc checks that both builds give the same indices.
//
// Values must not be NaN (a NaN is never greater, so it is never picked).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <span>

#include "engine/types.h"

namespace hearth::engine {

// REQUIRES: !values.empty().
Token FirstArgmax(std::span<const float> values);

// values.size() when no value at or after `from` is above `threshold`.
// REQUIRES: from <= values.size().
size_t FirstAbove(std::span<const float> values, size_t from, float threshold);

namespace logit_scan_internal {
// The builds, for logit_scan_test.cc. The Avx2 ones may run only where HaveAvx2() (an
// x86-64 CPU with AVX2, and a compiler that builds for it).
bool HaveAvx2();
Token FirstArgmaxPortable(std::span<const float> values);
Token FirstArgmaxAvx2(std::span<const float> values);
size_t FirstAbovePortable(std::span<const float> values, size_t from, float threshold);
size_t FirstAboveAvx2(std::span<const float> values, size_t from, float threshold);
}  // namespace logit_scan_internal

}  // namespace hearth::engine
