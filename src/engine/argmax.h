// FirstArgmax: the index of the first largest value, as llama.cpp's greedy sampler picks
// a token from its logits.
//
// Greedy decoding runs it once per stream per step over the whole vocabulary (248k
// logits, 1 MB, for Qwen3.5), on the engine thread while the backend's other threads
// wait, so its speed is part of what concurrent streams reach (docs/benchmarks.md,
// "Concurrent streams"). One portable loop serves every platform: it keeps a running
// maximum per lane in a form the compiler turns into vector compares and blends for the
// build's target (SSE2 on a generic x86-64 build, NEON on Apple silicon). On an x86-64
// CPU with AVX2, chosen at run time, the same loop is compiled for AVX2: 2-5 times as fast
// on 248k logits as the SSE2 build (argmax_test.cc checks both give the same index).
//
// Values must not be NaN (a NaN never compares greater, so it is never picked).
// Thread safety: a pure function.
#pragma once

#include <span>

#include "engine/types.h"

namespace hearth::engine {

// REQUIRES: !values.empty().
Token FirstArgmax(std::span<const float> values);

namespace argmax_internal {
// The two builds of the loop, for argmax_test.cc. Avx2 is available only where
// HaveAvx2() (an x86-64 CPU with AVX2 and a compiler that builds for it).
Token Portable(std::span<const float> values);
bool HaveAvx2();
Token Avx2(std::span<const float> values);
}  // namespace argmax_internal

}  // namespace hearth::engine
