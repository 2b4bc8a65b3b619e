// Detokenizer: turns a stream of tokens into a stream of text that never splits a UTF-8
// character, for streaming responses.
//
// Thread safety: one owner. The Model must outlive the Detokenizer.
#pragma once

#include <string>

#include "engine/model.h"
#include "engine/types.h"

namespace hearth::engine {

class Detokenizer {
 public:
  // `render_special`: control tokens come out as their text (e.g. "<think>").
  Detokenizer(const Model& model, bool render_special) : model_(model), render_special_(render_special) {}

  // Text completed by `token`: whole UTF-8 characters only; a character cut across
  // tokens is held until its last byte arrives.
  std::string Push(Token token);
  // What is still held, with incomplete bytes replaced by U+FFFD. Call at end of stream.
  std::string Flush();

 private:
  const Model& model_;
  bool render_special_;
  std::string pending_;
};

}  // namespace hearth::engine
