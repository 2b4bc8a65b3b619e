// Plain value types shared by the engine and its callers. No llama.h here: only
// src/engine/*.cc include it, so every other module stays engine-agnostic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace hearth::engine {

using Token = int32_t;   // a vocabulary id, in [0, n_vocab)
using Pos = int32_t;     // a position inside one sequence, counted from 0
using SeqId = int32_t;   // a sequence slot inside a Context, in [0, n_seq_max)

// How many leading tokens `a` and `b` share.
inline size_t CommonPrefix(std::span<const Token> a, std::span<const Token> b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

}  // namespace hearth::engine
