#include "mkmodel/vocab_edit.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf.h"

namespace hearth::mkmodel {
namespace {

// llama.cpp's llama_token_type (tokenizer.ggml.token_type).
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;

}  // namespace

Status ApplyVocabEdit(const VocabEdit& edit, gguf_context* tokenizer) {
  const int64_t tokens_key = gguf_find_key(tokenizer, "tokenizer.ggml.tokens");
  const int64_t types_key = gguf_find_key(tokenizer, "tokenizer.ggml.token_type");
  if (tokens_key < 0 || types_key < 0 || gguf_get_arr_type(tokenizer, types_key) != GGUF_TYPE_INT32 ||
      gguf_get_arr_n(tokenizer, types_key) != gguf_get_arr_n(tokenizer, tokens_key)) {
    return InvalidArgument("the vocab has no token type for each token");
  }
  const size_t n = gguf_get_arr_n(tokenizer, tokens_key);
  std::vector<std::string> texts(n);
  for (size_t i = 0; i < n; ++i) texts[i] = gguf_get_arr_str(tokenizer, tokens_key, i);
  const auto* type_data = static_cast<const int32_t*>(gguf_get_arr_data(tokenizer, types_key));
  std::vector<int32_t> types(type_data, type_data + n);

  std::vector<size_t> control_ids;
  for (size_t i = 0; i < n; ++i) {
    if (types[i] == kControl) control_ids.push_back(i);
  }
  if (control_ids.size() < edit.tokens.size()) {
    return InvalidArgument("the vocab has " + std::to_string(control_ids.size()) +
                           " control tokens; the family needs " + std::to_string(edit.tokens.size()));
  }

  std::optional<uint32_t> bos;
  std::optional<uint32_t> eos;
  for (size_t k = 0; k < control_ids.size(); ++k) {
    const size_t id = control_ids[k];
    if (k < edit.tokens.size()) {
      texts[id] = edit.tokens[k].text;
      types[id] = edit.tokens[k].control ? kControl : kUserDefined;
      if (edit.tokens[k].text == edit.bos) bos = static_cast<uint32_t>(id);
      if (edit.tokens[k].text == edit.eos) eos = static_cast<uint32_t>(id);
    } else {
      texts[id] = "<|unused_" + std::to_string(k - edit.tokens.size()) + "|>";
    }
  }
  if (!bos) return InvalidArgument("the family's BOS token '" + edit.bos + "' is not among its tokens");
  if (!eos) return InvalidArgument("the family's EOS token '" + edit.eos + "' is not among its tokens");

  std::vector<const char*> pointers;
  pointers.reserve(n);
  for (const std::string& t : texts) pointers.push_back(t.c_str());
  gguf_set_arr_str(tokenizer, "tokenizer.ggml.tokens", pointers.data(), n);
  gguf_set_arr_data(tokenizer, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), n);
  if (!edit.pre.empty()) gguf_set_val_str(tokenizer, "tokenizer.ggml.pre", edit.pre.c_str());
  gguf_set_val_u32(tokenizer, "tokenizer.ggml.bos_token_id", *bos);
  gguf_set_val_u32(tokenizer, "tokenizer.ggml.eos_token_id", *eos);
  gguf_set_val_bool(tokenizer, "tokenizer.ggml.add_bos_token", edit.add_bos);
  return Status::Ok();
}

}  // namespace hearth::mkmodel
