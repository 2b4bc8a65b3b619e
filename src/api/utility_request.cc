#include "api/json_fields.h"
#include "api/openai.h"
#include "api/utility.h"

namespace hearth::api::utility {
namespace {

ParseResult<TokenizeRequest> ParseTokenize(const Json& body) {
  TokenizeRequest req;
  std::optional<std::string> content;
  if (auto e = ReadString(body, "content", &content)) return *e;
  if (!content) return FieldError("content", "is required");
  req.content = std::move(*content);
  std::optional<bool> add_special, parse_special;
  if (auto e = ReadBool(body, "add_special", &add_special)) return *e;
  if (auto e = ReadBool(body, "parse_special", &parse_special)) return *e;
  req.add_special = add_special.value_or(req.add_special);
  req.parse_special = parse_special.value_or(req.parse_special);
  return req;
}

ParseResult<DetokenizeRequest> ParseDetokenize(const Json& body, int32_t n_vocab) {
  const Json* tokens = FindField(body, "tokens");
  if (tokens == nullptr) return FieldError("tokens", "is required");
  if (!tokens->is_array()) return FieldError("tokens", "must be an array of token ids");
  DetokenizeRequest req;
  req.tokens.reserve(tokens->size());
  // A float, a string or an id past int32 is refused, never truncated into a valid id.
  for (size_t i = 0; i < tokens->size(); ++i) {
    int64_t id = 0;
    if (auto e = ReadIntValue((*tokens)[i], IndexPath("tokens", i), 0, int64_t{n_vocab} - 1, &id)) return *e;
    req.tokens.push_back(static_cast<int32_t>(id));
  }
  return req;
}

ParseResult<bool> ReadAddGenerationPrompt(const Json& body) {
  std::optional<bool> add;
  if (auto e = ReadBool(body, "add_generation_prompt", &add)) return *e;
  return add.value_or(true);
}

}  // namespace

ParseResult<TokenizeRequest> ParseTokenizeRequest(std::string_view body) {
  return ParseObjectWith<TokenizeRequest>(body, ParseTokenize);
}

std::string TokenizeJson(const std::vector<int32_t>& tokens) {
  Json j;
  j["tokens"] = tokens;
  return DumpJson(j);
}

ParseResult<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, int32_t n_vocab) {
  return ParseObjectWith<DetokenizeRequest>(body, [n_vocab](const Json& j) { return ParseDetokenize(j, n_vocab); });
}

std::string DetokenizeJson(const std::string& content) {
  Json j;
  j["content"] = content;
  return DumpJson(j);
}

ParseResult<ApplyTemplateRequest> ParseApplyTemplateRequest(std::string_view body) {
  ParseResult<GenerationRequest> chat = openai::ParseChatCompletionRequest(body);
  if (!chat.ok()) return chat.error();
  ParseResult<bool> add = ParseObjectWith<bool>(body, ReadAddGenerationPrompt);
  if (!add.ok()) return add.error();
  return ApplyTemplateRequest{std::move(chat).value(), *add};
}

std::string ApplyTemplateJson(const std::string& prompt, size_t n_tokens) {
  Json j;
  j["prompt"] = prompt;
  j["n_tokens"] = n_tokens;
  return DumpJson(j);
}

}  // namespace hearth::api::utility
