#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hearth::bench {

std::optional<double> Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  const double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

std::optional<Spread> Summarize(const std::vector<double>& samples) {
  if (samples.empty()) return std::nullopt;
  Spread s;
  s.n = static_cast<int>(samples.size());
  s.p50 = *Percentile(samples, 50);
  s.p90 = *Percentile(samples, 90);
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / static_cast<double>(samples.size());
  return s;
}

std::string FormatNumber(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 100 || v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (a >= 10) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  } else if (a >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f", v);
  }
  return buf;
}

std::string FormatCell(const std::optional<int>& v) { return v ? std::to_string(*v) : "?"; }
std::string FormatCell(const std::optional<double>& v) { return v ? FormatNumber(*v) : "?"; }

}  // namespace hearth::bench
