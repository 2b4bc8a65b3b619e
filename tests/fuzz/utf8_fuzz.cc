// UTF-8 helpers (src/base/utf8.h) over arbitrary bytes, checked against their contracts
// and against each other.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "check.h"

namespace {

// U+FFFD, what SanitizeUtf8 writes for each ill-formed subsequence.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const std::string clean = hearth::SanitizeUtf8(bytes);
  Check(hearth::IsValidUtf8(clean), "SanitizeUtf8 gives valid UTF-8");
  const bool valid = hearth::IsValidUtf8(bytes);
  Check(!valid || clean == bytes, "SanitizeUtf8 leaves valid UTF-8 alone");
  Check(valid || clean.find(kReplacement) != std::string::npos, "SanitizeUtf8 marks what it replaced");
  Check(hearth::SanitizeUtf8(clean) == clean, "SanitizeUtf8 is idempotent");

  const size_t complete = hearth::CompleteUtf8Prefix(bytes);
  Check(complete <= size && size - complete <= 3, "CompleteUtf8Prefix holds back at most 3 bytes");
  // What the Detokenizer relies on: sanitizing the complete prefix and the held tail apart
  // gives what sanitizing everything at once gives, and valid text is never held back
  // (its last character is whole).
  Check(hearth::SanitizeUtf8(bytes.substr(0, complete)) + hearth::SanitizeUtf8(bytes.substr(complete)) == clean,
        "splitting at CompleteUtf8Prefix does not change SanitizeUtf8");
  Check(!valid || complete == size, "valid UTF-8 is complete");
  return 0;
}
