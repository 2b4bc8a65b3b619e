// Deterministic, real-looking filler text for benchmark workloads: English prose, code,
// and tool output, sized in (estimated) tokens, from a small built-in word list.
//
// The text only has to tokenize like real text (common words, identifiers, punctuation,
// indentation); nobody reads it. Sizes are estimates from word and punctuation counts,
// calibrated against the Qwen3.5 tokenizer (text_test.cc checks it stays within 25%).
//
// Thread safety: Rng and the generators hold no shared state; one Rng per thread.
//
// Invariants:
//  1. The same seed gives the same sequence of numbers and the same text on every
//     platform (no std::uniform_*_distribution, whose output is implementation-defined).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hearth::bench {

// SplitMix64: tiny, fast, portable.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int Range(int lo, int hi);
  // True with probability `p`.
  bool Chance(double p);
  template <typename T>
  const T& Pick(std::span<const T> items) {
    return items[static_cast<size_t>(Range(0, static_cast<int>(items.size()) - 1))];
  }

 private:
  uint64_t state_;
};

// Mixes several values into one seed, so (seed, rep, session, turn) streams differ.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0);

// Roughly how many tokens `text` is: words, punctuation, digits and line breaks.
int EstimateTokens(std::string_view text);

// Paragraphs of English sentences, about `n_tokens` long (at least one sentence).
std::string Prose(Rng& rng, int n_tokens);
// One question or request a user might type, about `n_tokens` long.
std::string UserRequest(Rng& rng, int n_tokens);
// Source code (C++- or Python-flavoured) about `n_tokens` long.
std::string Code(Rng& rng, int n_tokens, bool python);
// A source path like "src/cache/radix_tree.cc".
std::string SourcePath(Rng& rng);
// An identifier like "prefix_length" or "MatchPrefix".
std::string Identifier(Rng& rng, bool camel);
// 32 lowercase hex digits.
std::string HexId(Rng& rng, int n_digits = 32);

}  // namespace hearth::bench
