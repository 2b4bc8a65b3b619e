// Volatile spans: per-request content (a request id, a timestamp, a billing nonce) that
// makes a prompt leave the cache early and rejoin it right after.
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "cache/prefix_tree.h"

namespace hearth::cache {

struct VolatileSpan {
  int32_t start = 0;         // first differing position (the same in both sequences)
  int32_t end_new = 0;       // [start, end_new) of `prompt` differs ...
  int32_t end_earlier = 0;   // ... from [start, end_earlier) of `earlier`
};

// `prompt` and `earlier` agree on [0, start) and differ at `start`. Finds the shortest
// pair of differing spans (each at most max_span tokens) after which both agree again
// for at least min_rejoin tokens (or to the end of the shorter one, if that comes
// first and is at least that long). nullopt when they do not rejoin.
std::optional<VolatileSpan> FindVolatileSpan(std::span<const Token> prompt, std::span<const Token> earlier,
                                             int32_t start, int32_t max_span = 64, int32_t min_rejoin = 16);

}  // namespace hearth::cache
