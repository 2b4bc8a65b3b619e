// Stabilizer: opt-in rules (--stabilize) that take per-request content out of the early
// part of a conversation, where it would defeat prefix reuse on every turn.
//
// Each rule is a preset or a regular expression, run by RE2: matching takes time linear in
// the text and bounded stack, whatever the pattern and however long the line (a
// backtracking matcher overflowed the stack on one long header line and took the server
// down). RE2 has no backreferences or lookaround; such patterns are refused at start-up.
// Matches in every message but the last
// are removed; in kMoveToEnd mode they are appended, one per line, to the last message,
// so the model still sees them, after everything cacheable.
//
// Presets: "uuid" (request ids), "ulid", "timestamp" (ISO-8601 date-times),
// "claude-billing" (Claude Code's x-anthropic-billing-header line).
//
// Thread safety: immutable after Parse; Apply may run on any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/types.h"
#include "base/status.h"

namespace re2 {
class RE2;
}

namespace hearth::chat {

enum class StabilizeMode { kMoveToEnd, kDrop };

class Stabilizer {
 public:
  Stabilizer() = default;  // no rules: Apply changes nothing

  // `specs`: preset names, or "re:<RE2 regex>". Errors: kInvalidArgument naming the
  // unknown preset, or the regex RE2 does not accept and why.
  static StatusOr<Stabilizer> Parse(const std::vector<std::string>& specs, StabilizeMode mode);

  // Rewrites `messages` in place; returns how many spans it moved or dropped.
  int Apply(std::vector<api::Message>& messages) const;

  bool empty() const { return rules_.empty(); }

 private:
  struct Rule {
    std::string name;
    std::shared_ptr<const re2::RE2> pattern;  // immutable; RE2 matches from many threads
  };
  std::vector<Rule> rules_;
  StabilizeMode mode_ = StabilizeMode::kMoveToEnd;
};

}  // namespace hearth::chat
