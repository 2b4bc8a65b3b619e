// The streaming Detokenizer (src/engine/detokenizer.h) over arbitrary token streams,
// valid ids or not, on the tiny Qwen3.5 model: what it streams is valid UTF-8 and adds
// up to the sanitized whole detokenization, however the pieces cut characters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "engine/detokenizer.h"
#include "fuzz_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  const hearth::engine::Model& model = hearth::fuzz::TinyModel();
  const int n_vocab = model.info().n_vocab;
  if (size < 1) return 0;
  const bool render_special = (data[0] & 1) != 0;
  // Three bytes per token: ids across the vocabulary and a few past either end.
  std::vector<hearth::engine::Token> tokens;
  for (size_t i = 1; i + 3 <= size; i += 3) {
    const uint32_t v = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16);
    tokens.push_back(static_cast<hearth::engine::Token>(v % static_cast<uint32_t>(n_vocab + 16)) - 8);
  }
  hearth::engine::Detokenizer detok(model, render_special);
  std::string streamed;
  for (hearth::engine::Token t : tokens) {
    const std::string piece = detok.Push(t);
    Check(hearth::IsValidUtf8(piece), "each pushed piece is valid UTF-8");
    streamed += piece;
  }
  streamed += detok.Flush();
  Check(streamed == hearth::SanitizeUtf8(model.Detokenize(tokens, render_special)),
        "the stream adds up to the sanitized detokenization");
  return 0;
}
