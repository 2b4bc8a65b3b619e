// TokenMemo: tokenizes rendered chat prompts message by message, remembering messages.
//
// Each request carries the whole conversation, and the shadow planner renders it again
// for every target, so the same messages were tokenized over and over (a quarter of the
// server's CPU time on the tiny model in a 30-turn chat; ~6 ms per 1,000 tokens). The
// text is split right before each occurrence of the turn marker (Qwen3.5:
// "<|im_start|>"); the pieces are tokenized apart, and every piece but the last (the
// newest message and the generation prompt, which grow) is remembered.
//
// Contract: Tokenize(text) == model.Tokenize(text, /*add_bos=*/false,
// /*parse_special=*/true) for every text. Create refuses a marker for which splitting
// could change the tokens (Model::SplitsTokenizationBefore).
//
// Thread safety: Tokenize may be called from any thread at once.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "engine/types.h"

namespace hearth::engine {

class TokenMemo {
 public:
  // nullptr when `marker` is not a safe split point.
  static std::unique_ptr<TokenMemo> Create(const Model& model, Token marker, size_t max_bytes = 64u << 20);

  std::vector<Token> Tokenize(std::string_view text) const;

  size_t hits() const;
  size_t misses() const;

 private:
  TokenMemo(const Model& model, std::string marker, size_t max_bytes);
  std::vector<Token> Piece(std::string_view piece, bool remember) const;

  const Model& model_;
  const std::string marker_;
  const size_t max_bytes_;

  mutable std::mutex mu_;
  // Most recently used first; `index_` points into it. Bytes: keys' and tokens' sizes.
  mutable std::list<std::pair<std::string, std::vector<Token>>> lru_;
  mutable std::unordered_map<std::string_view, decltype(lru_)::iterator> index_;
  mutable size_t bytes_ = 0;
  mutable size_t hits_ = 0, misses_ = 0;
};

}  // namespace hearth::engine
