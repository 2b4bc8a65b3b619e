#include "engine/stop_strings.h"

#include <algorithm>

namespace hearth::engine {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStrings::Result StopStrings::Feed(std::string_view piece) {
  Result r;
  if (stopped_) return r;
  held_ += piece;

  // Earliest complete stop string wins.
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos && (best == std::string::npos || at < best)) {
      best = at;
      r.matched = s;
    }
  }
  if (best != std::string::npos) {
    r.text = held_.substr(0, best);
    r.stopped = true;
    stopped_ = true;
    held_.clear();
    return r;
  }

  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) == std::string_view(s).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopStrings::Flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace hearth::engine
