#include "engine/token_memo.h"

namespace hearth::engine {

std::unique_ptr<TokenMemo> TokenMemo::Create(const Model& model, Token marker, size_t max_bytes) {
  if (!model.SplitsTokenizationBefore(marker)) return nullptr;
  return std::unique_ptr<TokenMemo>(new TokenMemo(model, model.TokenPiece(marker, /*render_special=*/true), max_bytes));
}

TokenMemo::TokenMemo(const Model& model, std::string marker, size_t max_bytes)
    : model_(model), marker_(std::move(marker)), max_bytes_(max_bytes) {}

std::vector<Token> TokenMemo::Tokenize(std::string_view text) const {
  std::vector<Token> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = text.find(marker_, begin + (text.compare(begin, marker_.size(), marker_) == 0 ? marker_.size() : 0));
    const bool last = next == std::string_view::npos;
    if (last) next = text.size();
    auto tokens = Piece(text.substr(begin, next - begin), /*remember=*/!last);
    out.insert(out.end(), tokens.begin(), tokens.end());
    begin = next;
  }
  return out;
}

std::vector<Token> TokenMemo::Piece(std::string_view piece, bool remember) const {
  if (remember) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(piece); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  std::vector<Token> tokens = model_.Tokenize(piece, /*add_bos=*/false, /*parse_special=*/true);
  if (!remember) return tokens;
  const size_t size = piece.size() + tokens.size() * sizeof(Token);
  if (size > max_bytes_) return tokens;
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(piece) != 0) return tokens;  // another thread was first
  lru_.emplace_front(std::string(piece), tokens);
  index_.emplace(lru_.front().first, lru_.begin());
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    auto& [key, toks] = lru_.back();
    bytes_ -= key.size() + toks.size() * sizeof(Token);
    index_.erase(key);
    lru_.pop_back();
  }
  return tokens;
}

size_t TokenMemo::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

size_t TokenMemo::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace hearth::engine
