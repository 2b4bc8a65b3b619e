#include "api/json_fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/utf8.h"

namespace hearth::api {
namespace {

std::string FormatNumber(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// The JSON value's integer, when it has one that fits in int64_t.
std::optional<int64_t> AsInt64(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    // 2^63 is exactly representable; anything at or past it does not fit.
    if (std::floor(d) != d || std::fabs(d) >= 9.2233720368547758e18) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

}  // namespace

ParseResult<Json> ParseJson(std::string_view text) {
  bool too_deep = false;
  // The keys of each object still open, innermost last. A duplicate key is refused: the
  // parser would keep the last one silently, where another reader of the same bytes (a
  // proxy that checked the request) may take the first.
  std::vector<std::set<std::string, std::less<>>> open_keys;
  std::optional<std::string> duplicate;
  // At a container's start event, `depth` counts the containers already open. Once a
  // check fails everything after is discarded (and no end events come for what it
  // drops), so the bookkeeping only has to hold until then.
  Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) {
      if (depth >= kMaxJsonDepth) too_deep = true;
      if (event == Json::parse_event_t::object_start) open_keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_keys.empty()) open_keys.pop_back();
    } else if (event == Json::parse_event_t::key && !open_keys.empty() && !duplicate) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_keys.back().insert(key).second) duplicate = key;
    }
    return !too_deep && !duplicate;
  };
  Json parsed;
  try {
    parsed = Json::parse(text.begin(), text.end(), check);
  } catch (const Json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...";
    // the bracketed tag means nothing to a client.
    std::string_view what = e.what();
    size_t tag_end = what.find("] ");
    if (tag_end != std::string_view::npos) what.remove_prefix(tag_end + 2);
    return InvalidRequest("", "is not valid JSON: " + std::string(what));
  } catch (const std::exception& e) {
    return InvalidRequest("", std::string("could not be read: ") + e.what());
  }
  if (too_deep) {
    return InvalidRequest("", "nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  if (duplicate) {
    constexpr size_t kMaxQuoted = 64;
    std::string key = duplicate->substr(0, CompleteUtf8Prefix(std::string_view(*duplicate).substr(0, kMaxQuoted)));
    if (key.size() < duplicate->size()) key += "...";
    return InvalidRequest("", "has the key \"" + key + "\" more than once in one object");
  }
  return parsed;
}

ParseResult<Json> ParseJsonObject(std::string_view body) {
  ParseResult<Json> parsed = ParseJson(body);
  if (!parsed.ok()) {
    ApiError e = parsed.error();
    e.message = "request body " + e.message;
    return e;
  }
  if (!parsed->is_object()) {
    return InvalidRequest("", std::string("request body must be a JSON object, not ") +
                                  parsed->type_name());
  }
  return parsed;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FieldPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string path(parent);
  path += '.';
  path += key;
  return path;
}

std::string IndexPath(std::string_view parent, size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

ApiError FieldError(const std::string& path, std::string_view what) {
  return InvalidRequest(path, path + " " + std::string(what));
}

ApiError TextOnlyError(const std::string& path, std::string_view part_type) {
  return InvalidRequest(path, path + " is a " + Quoted(part_type) +
                                  " part, but this model accepts text only");
}

bool IsMediaPartType(std::string_view type) {
  return type == "image_url" || type == "input_image" || type == "image" ||
         type == "input_audio" || type == "audio" || type == "file" || type == "input_file" || type == "document" ||
         type == "video_url";
}

const Json* FindField(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

MaybeError ReadString(const Json& obj, std::string_view key, std::optional<std::string>* out,
                      std::string_view parent) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return FieldError(FieldPath(parent, key), "must be a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

MaybeError ReadBool(const Json& obj, std::string_view key, std::optional<bool>* out,
                    std::string_view parent) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return FieldError(FieldPath(parent, key), "must be a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

MaybeError ReadInt(const Json& obj, std::string_view key, int64_t min, int64_t max,
                   std::optional<int64_t>* out, std::string_view parent) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::nullopt;
  int64_t n = 0;
  if (auto e = ReadIntValue(*v, FieldPath(parent, key), min, max, &n)) return e;
  *out = n;
  return std::nullopt;
}

MaybeError ReadIntValue(const Json& v, const std::string& path, int64_t min, int64_t max, int64_t* out) {
  std::optional<int64_t> n = AsInt64(v);
  if (!n || *n < min || *n > max) {
    std::string what = "must be an integer ";
    if (max == std::numeric_limits<int64_t>::max()) {
      what += ">= " + std::to_string(min);
    } else {
      what += "from " + std::to_string(min) + " to " + std::to_string(max);
    }
    return FieldError(path, what);
  }
  *out = *n;
  return std::nullopt;
}

int SaturateToInt(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(n, std::numeric_limits<int>::min(),
                                              std::numeric_limits<int>::max()));
}

MaybeError ReadFloat(const Json& obj, std::string_view key, NumberRange range,
                     std::optional<float>* out, std::string_view parent) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::nullopt;
  bool in_range = false;
  double d = 0;
  if (v->is_number()) {
    d = v->get<double>();
    bool above_min = range.min_exclusive ? d > range.min : d >= range.min;
    in_range = above_min && d <= range.max;
  }
  if (!in_range) {
    std::string what = range.min_exclusive
                           ? "must be a number greater than " + FormatNumber(range.min) +
                                 " and at most " + FormatNumber(range.max)
                           : "must be a number from " + FormatNumber(range.min) + " to " +
                                 FormatNumber(range.max);
    return FieldError(FieldPath(parent, key), what);
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

MaybeError ReadStopStrings(const Json& obj, std::string_view key, std::vector<std::string>* out,
                           std::string_view parent) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::nullopt;
  const std::string path = FieldPath(parent, key);
  const std::string too_long = "must be at most " + std::to_string(kMaxStopStringBytes) + " bytes long";
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > kMaxStopStringBytes) return FieldError(path, too_long);
    if (!s.empty()) out->push_back(s);
    return std::nullopt;
  }
  if (!v->is_array()) return FieldError(path, "must be a string or an array of strings");
  if (v->size() > kMaxStopStrings) {
    return FieldError(path, "must hold at most " + std::to_string(kMaxStopStrings) + " strings");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& s = (*v)[i];
    if (!s.is_string()) return FieldError(IndexPath(path, i), "must be a string");
    const auto& text = s.get_ref<const std::string&>();
    if (text.size() > kMaxStopStringBytes) return FieldError(IndexPath(path, i), too_long);
    if (!text.empty()) out->push_back(text);
  }
  return std::nullopt;
}

MaybeError ReadTextContent(const Json& content, const std::string& path, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return FieldError(path, "must be a string or an array of content parts");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_path = IndexPath(path, i);
    if (!part.is_object()) return FieldError(part_path, "must be an object");
    std::optional<std::string> type;
    if (auto e = ReadString(part, "type", &type, part_path)) return e;
    if (!type) return FieldError(FieldPath(part_path, "type"), "is required");
    if (IsMediaPartType(*type)) return TextOnlyError(part_path, *type);
    if (*type != "text") {
      return FieldError(FieldPath(part_path, "type"),
                        Quoted(*type) + " is not a supported content part type");
    }
    std::optional<std::string> piece;
    if (auto e = ReadString(part, "text", &piece, part_path)) return e;
    if (!piece) return FieldError(FieldPath(part_path, "text"), "is required");
    AppendPart(&text, *piece);
  }
  *out = std::move(text);
  return std::nullopt;
}

void AppendPart(std::string* text, std::string_view piece) {
  if (!text->empty() && !piece.empty()) *text += '\n';
  *text += piece;
}

Json CacheReportJson(const CacheReport& r) {
  Json j;
  j["reused_tokens"] = r.reused_tokens;
  j["prefilled_tokens"] = r.prefilled_tokens;
  j["written_tokens"] = r.written_tokens;
  j["tier"] = r.tier.empty() ? Json(nullptr) : Json(r.tier);
  j["restore_ms"] = r.restore_ms;
  j["restored_bytes"] = r.restored_bytes;
  if (!r.stopped_because.empty()) j["stopped_because"] = r.stopped_because;
  if (!r.shared_miss.empty()) j["shared_miss"] = r.shared_miss;
  if (r.volatile_span) {
    j["volatile_span"] = {{"message", r.volatile_message},
                          {"start", r.volatile_start},
                          {"end", r.volatile_end},
                          {"text", r.volatile_text}};
  }
  return j;
}

}  // namespace hearth::api
