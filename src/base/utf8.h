// UTF-8 helpers for streams of bytes that arrive in pieces (token by token).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hearth {

// Length of the longest prefix of `bytes` that does not end inside an incomplete UTF-8
// sequence. Invalid bytes count as complete (they are not going to become valid by
// waiting). bytes.size() - result <= 3.
size_t CompleteUtf8Prefix(std::string_view bytes);

// True when `bytes` is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

// `bytes` with every maximal ill-formed subsequence replaced by one U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace hearth
