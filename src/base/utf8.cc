#include "base/utf8.h"

#include <cstdint>

namespace hearth {
namespace {

// Expected length of a sequence from its lead byte; 0 for a byte that cannot lead.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the well-formed sequence at the start of `s`, or 0 when it is ill-formed or
// cut short.
size_t ValidSequenceAt(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  const size_t len = SequenceLength(b0);
  if (len == 0 || len > s.size()) return 0;
  for (size_t i = 1; i < len; ++i) {
    if (!IsContinuation(static_cast<unsigned char>(s[i]))) return 0;
  }
  if (len >= 3) {
    const auto b1 = static_cast<unsigned char>(s[1]);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // > U+10FFFF
  }
  return len;
}

// Bytes that one U+FFFD replaces at an ill-formed position: the lead byte plus the
// continuation bytes that could still have belonged to it (Unicode's "maximal subpart").
size_t IllFormedLength(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  const size_t len = SequenceLength(b0);
  size_t i = 1;
  while (i < len && i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!IsContinuation(c)) break;
    if (i == 1 && ((b0 == 0xE0 && c < 0xA0) || (b0 == 0xED && c > 0x9F) || (b0 == 0xF0 && c < 0x90) ||
                   (b0 == 0xF4 && c > 0x8F))) {
      break;
    }
    ++i;
  }
  return i;
}

}  // namespace

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for a lead byte whose sequence is still open.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if (IsContinuation(c)) continue;
    const size_t len = SequenceLength(c);
    if (len > back) return n - back;  // open sequence: hold it back
    return n;
  }
  return n;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t len = ValidSequenceAt(bytes.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t len = ValidSequenceAt(bytes.substr(i));
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      i += IllFormedLength(bytes.substr(i));
    } else {
      out.append(bytes.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace hearth
