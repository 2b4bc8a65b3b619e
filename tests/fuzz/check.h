// Check(): how the fuzz targets in tests/fuzz/ state a property. A failed one aborts, and
// libFuzzer saves the input that broke it as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace hearth::fuzz {

inline void Check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "hearth fuzz: property failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace hearth::fuzz
