// Order statistics for benchmark samples: median, percentiles, spread.
//
// Percentiles interpolate linearly between the two nearest ranks (the "R-7" definition
// spreadsheets use): p50 of {1, 2, 3, 4} is 2.5, p90 of {1..10} is 9.1.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hearth::bench {

struct Spread {
  int n = 0;
  double p50 = 0, p90 = 0, min = 0, max = 0, mean = 0;
};

// REQUIRES: 0 <= p <= 100. Returns nullopt for no samples.
std::optional<double> Percentile(std::vector<double> samples, double p);
// Returns nullopt for no samples.
std::optional<Spread> Summarize(const std::vector<double>& samples);

// "12.3", "1234", "0.012": three significant digits, no exponent.
std::string FormatNumber(double v);
// A table cell: the value (FormatNumber for doubles), or "?" when there is none.
std::string FormatCell(const std::optional<int>& v);
std::string FormatCell(const std::optional<double>& v);

}  // namespace hearth::bench
