// Typed reads of request JSON whose errors name the field, for the OpenAI and Anthropic
// parsers only (not for the server core, which never sees wire JSON).
//
// Every reader leaves *out untouched when the field is absent or JSON null (clients send
// null to mean "default") and returns an error when the field is present with the wrong
// type or out of range. Paths read like the client's own code: "messages[2].content".
//
// Nothing here throws: nlohmann's exceptions are caught in ParseJson, and readers
// check types before converting.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/parse_result.h"

namespace hearth::api {

// Ordered, so that objects the client sent (tool schemas, tool_use inputs, tool call
// arguments) are re-serialized with their keys in the client's order: the prompt then
// matches what the model saw last turn, and responses list "id" first like the docs.
using Json = nlohmann::ordered_json;

// Nothing when a read succeeded, otherwise the error to hand back.
using MaybeError = std::optional<ApiError>;

// Deeper request bodies are refused: dumping or copying nlohmann values recurses.
inline constexpr int kMaxJsonDepth = 128;

// Parses any JSON value, refusing nesting deeper than kMaxJsonDepth and an object that
// holds a key twice (which of the two counts differs between readers). Malformed JSON
// gives a 400 carrying the parser's line and column; its message starts with a verb ("is
// not valid JSON: ...") for the caller to put the thing's name in front.
ParseResult<Json> ParseJson(std::string_view text);
// As ParseJson, for a request body that must be a JSON object.
ParseResult<Json> ParseJsonObject(std::string_view body);

// Parses `body` as an object and returns parse(object). An exception escaping `parse`
// (a check missing above it) becomes a 500 instead of crossing into the HTTP layer.
template <typename T, typename Fn>
ParseResult<T> ParseObjectWith(std::string_view body, Fn parse) {
  try {
    ParseResult<Json> json = ParseJsonObject(body);
    if (!json.ok()) return json.error();
    return parse(json.value());
  } catch (const std::exception& e) {
    return ApiError{500, "api_error", std::string("could not read request: ") + e.what(), ""};
  }
}

// Compact JSON text. Invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string DumpJson(const Json& value);

// usage.hearth_cache: how the prompt was served from the cache.
Json CacheReportJson(const CacheReport& report);

// "parent.key", or "key" at the top level.
std::string FieldPath(std::string_view parent, std::string_view key);
// "parent[i]".
std::string IndexPath(std::string_view parent, size_t i);

// A 400 whose message is "<path> <what>", e.g. "n must be 1".
ApiError FieldError(const std::string& path, std::string_view what);
// A 400 for image, audio and file inputs.
ApiError TextOnlyError(const std::string& path, std::string_view part_type);
// True for the content part types that carry media rather than text, in either API.
bool IsMediaPartType(std::string_view type);

// obj[key], or nullptr when absent or null. REQUIRES: obj.is_object().
const Json* FindField(const Json& obj, std::string_view key);

// The readers. REQUIRES: obj.is_object(). `parent` is the path of obj ("" at the top).
MaybeError ReadString(const Json& obj, std::string_view key, std::optional<std::string>* out,
                      std::string_view parent = "");
MaybeError ReadBool(const Json& obj, std::string_view key, std::optional<bool>* out,
                    std::string_view parent = "");
// Accepts integral JSON numbers (1024 or 1024.0) in [min, max].
MaybeError ReadInt(const Json& obj, std::string_view key, int64_t min, int64_t max,
                   std::optional<int64_t>* out, std::string_view parent = "");
// The same for a value that is not an object's field (an array element); null is an
// error here. `path` names it.
MaybeError ReadIntValue(const Json& value, const std::string& path, int64_t min, int64_t max, int64_t* out);

// A count read with ReadInt, saturated to int: a client asking for 2^40 tokens means
// "no limit", not an error.
int SaturateToInt(int64_t n);

struct NumberRange {
  double min = 0;
  double max = 0;
  bool min_exclusive = false;  // (min, max] instead of [min, max]
};
MaybeError ReadFloat(const Json& obj, std::string_view key, NumberRange range,
                     std::optional<float>* out, std::string_view parent = "");

// Stop sequences: a string or an array of at most kMaxStopStrings strings of at most
// kMaxStopStringBytes bytes each, appended to *out; empty strings are dropped (an empty
// stop sequence would end every generation at once). The bounds keep the per-token stop
// scan small: OpenAI allows 4, the limits here leave room for any real client.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 1024;
MaybeError ReadStopStrings(const Json& obj, std::string_view key, std::vector<std::string>* out,
                           std::string_view parent = "");

// Text content: a string, or an array of {type:"text", text} parts joined with "\n".
// Media parts give TextOnlyError; other part types a FieldError. `path` names `content`.
MaybeError ReadTextContent(const Json& content, const std::string& path, std::string* out);

// Joins `piece` onto *text with "\n" unless *text is empty. The one rule for gluing
// text parts together, so that both APIs render the same prompt for the same text.
void AppendPart(std::string* text, std::string_view piece);

}  // namespace hearth::api
