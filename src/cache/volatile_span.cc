#include "cache/volatile_span.h"

#include <algorithm>

namespace hearth::cache {

std::optional<VolatileSpan> FindVolatileSpan(std::span<const Token> prompt, std::span<const Token> earlier,
                                             int32_t start, int32_t max_span, int32_t min_rejoin) {
  const auto np = static_cast<int32_t>(prompt.size());
  const auto ne = static_cast<int32_t>(earlier.size());
  if (start < 0 || start >= np || start >= ne) return std::nullopt;
  // Try span lengths in order of their sum, so the tightest explanation wins.
  for (int32_t total = 1; total <= 2 * max_span; ++total) {
    for (int32_t a = std::max(0, total - max_span); a <= std::min(total, max_span); ++a) {
      const int32_t b = total - a;
      const int32_t p = start + a, e = start + b;
      const int32_t room = std::min(np - p, ne - e);
      if (room < min_rejoin) continue;
      const int32_t need = std::min(room, min_rejoin);
      if (std::equal(prompt.begin() + p, prompt.begin() + p + need, earlier.begin() + e)) {
        return VolatileSpan{start, p, e};
      }
    }
  }
  return std::nullopt;
}

}  // namespace hearth::cache
