#include "engine/detokenizer.h"

#include "base/utf8.h"

namespace hearth::engine {

std::string Detokenizer::Push(Token token) {
  pending_ += model_.TokenPiece(token, render_special_);
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string Detokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace hearth::engine
