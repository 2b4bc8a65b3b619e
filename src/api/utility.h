// hearth's own routes beside the two APIs, in llama-server's shapes: POST /tokenize,
// POST /detokenize and POST /apply-template.
//
// Pure translation, like openai.h: no engine, no HTTP. Thread safety: pure functions.
//
// Invariants:
//   1. Nothing here throws. A wrongly typed or missing field is a 400 ApiError naming it
//      ("add_special must be a boolean", "tokens[2] must be an integer from 0 to 151935");
//      the HTTP layer answers it in the OpenAI error shape.
//   2. Unknown fields are ignored; null means "default", as in the generation routes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/parse_result.h"
#include "api/types.h"

namespace hearth::api::utility {

// {"content": "...", "add_special": false, "parse_special": true}
struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // add the model's BOS/EOS tokens
  bool parse_special = true;  // "<|im_start|>" in content is the control token
};
ParseResult<TokenizeRequest> ParseTokenizeRequest(std::string_view body);
// {"tokens": [...]}
std::string TokenizeJson(const std::vector<int32_t>& tokens);

// {"tokens": [...]}, each an id in [0, n_vocab).
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};
ParseResult<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, int32_t n_vocab);
// {"content": "..."}; invalid UTF-8 becomes U+FFFD.
std::string DetokenizeJson(const std::string& content);

// An OpenAI chat body plus "add_generation_prompt" (default true; false renders the
// conversation as history only).
struct ApplyTemplateRequest {
  GenerationRequest chat;
  bool add_generation_prompt = true;
};
ParseResult<ApplyTemplateRequest> ParseApplyTemplateRequest(std::string_view body);
// {"prompt": "...", "n_tokens": n}
std::string ApplyTemplateJson(const std::string& prompt, size_t n_tokens);

}  // namespace hearth::api::utility
