// Internal to mkmodel: applies a VocabEdit (model_spec.h) to the tokenizer keys copied
// from a shipped vocab, before they are written into the model file.
//
// The family's tokens take the ids of the vocab's control tokens, lowest first; the
// control tokens left over become "<|unused_N|>", so none of the shipped family's own
// markers (llama 3's <|eot_id|>) stays behind for the loader to take as an end of
// generation. Ordinary tokens and merges are untouched, so text tokenizes as before.
#pragma once

#include "base/status.h"
#include "mkmodel/model_spec.h"

struct gguf_context;

namespace hearth::mkmodel {

// REQUIRES: `tokenizer` holds tokenizer.ggml.tokens and tokenizer.ggml.token_type.
// Errors: InvalidArgument when the vocab has fewer control tokens than `edit` needs or no
// token types; `tokenizer` is then unchanged.
Status ApplyVocabEdit(const VocabEdit& edit, gguf_context* tokenizer);

}  // namespace hearth::mkmodel
