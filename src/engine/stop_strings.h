// StopStrings: finds stop sequences in streamed text without emitting any part of them.
//
// Text arrives in pieces; a piece may end with the beginning of a stop string, so that
// tail is held back until the next piece shows whether the stop string completes.
// Each Feed looks at that tail (shorter than the longest stop string) plus the new piece,
// never at the text already released, so its cost is about n_stops x (longest stop +
// piece); the API bounds n_stops and their length (docs/api.md, Limits).
//
// Thread safety: one owner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth::engine {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; text ends right before it
    std::string matched;   // which one, when stopped
  };

  // Feeds the next piece. After a result with stopped == true, further calls return
  // nothing.
  Result Feed(std::string_view piece);
  // Releases the held-back tail at end of generation.
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace hearth::engine
