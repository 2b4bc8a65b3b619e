// The typed JSON readers (src/api/json_fields.h) over arbitrary bytes: ParseJson never
// throws, what it accepts dumps and parses back to the same value, and every reader
// either refuses a field or returns a value inside the bounds it was given.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/json_fields.h"
#include "base/utf8.h"
#include "check.h"

namespace {

using hearth::api::Json;
using hearth::fuzz::Check;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The ranges the OpenAI and Anthropic parsers read numbers with.
constexpr hearth::api::NumberRange kFloatRanges[] = {{0, 2}, {0, 1, true}, {-2, 2}, {0, 10, true}, {0, 1}};
struct IntRange {
  int64_t min, max;
};
constexpr IntRange kIntRanges[] = {{1, kInt64Max}, {-1, kInt64Max}, {kInt64Min, kInt64Max}, {0, 100}};

void ReadEveryWay(const Json& obj, const std::string& key) {
  std::optional<std::string> s;
  Check(hearth::api::ReadString(obj, key, &s).has_value() || !s || hearth::IsValidUtf8(*s),
        "ReadString gives valid UTF-8");
  std::optional<bool> b;
  hearth::api::ReadBool(obj, key, &b);
  for (const IntRange& r : kIntRanges) {
    std::optional<int64_t> n;
    const bool refused = hearth::api::ReadInt(obj, key, r.min, r.max, &n).has_value();
    Check(refused || !n || (*n >= r.min && *n <= r.max), "ReadInt stays in range");
  }
  for (const auto& r : kFloatRanges) {
    std::optional<float> f;
    const bool refused = hearth::api::ReadFloat(obj, key, r, &f).has_value();
    Check(refused || !f || (*f >= static_cast<float>(r.min) && *f <= static_cast<float>(r.max)),
          "ReadFloat stays in range");
  }
  std::vector<std::string> stops;
  if (!hearth::api::ReadStopStrings(obj, key, &stops).has_value()) {
    Check(stops.size() <= hearth::api::kMaxStopStrings, "ReadStopStrings bounds the count");
    for (const auto& stop : stops) {
      Check(!stop.empty() && stop.size() <= hearth::api::kMaxStopStringBytes, "ReadStopStrings bounds each string");
    }
  }
  std::string text;
  if (const Json* v = hearth::api::FindField(obj, key)) hearth::api::ReadTextContent(*v, key, &text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto parsed = hearth::api::ParseJson(input);
  if (!parsed.ok()) {
    Check(parsed.error().http_status == 400, "malformed JSON is a 400");
    return 0;
  }
  const std::string dumped = hearth::api::DumpJson(*parsed);
  Check(hearth::IsValidUtf8(dumped), "DumpJson gives valid UTF-8");
  auto again = hearth::api::ParseJson(dumped);
  Check(again.ok() && *again == *parsed, "DumpJson output parses back to the same value");
  if (!parsed->is_object()) return 0;
  int n_keys = 0;
  for (const auto& [key, value] : parsed->items()) {
    if (++n_keys > 16) break;
    ReadEveryWay(*parsed, key);
  }
  ReadEveryWay(*parsed, "absent-key");
  return 0;
}
