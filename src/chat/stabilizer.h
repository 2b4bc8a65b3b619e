// Stabilizer: opt-in rules (--stabilize) that take per-request content out of the early
// part of a conversation, where it would defeat prefix reuse on every turn.
//
// Each rule is a preset or a regular expression. Matches in every message but the last
// are removed; in kMoveToEnd mode they are appended, one per line, to the last message,
// so the model still sees them, after everything cacheable.
//
// Presets: "uuid" (request ids), "ulid", "timestamp" (ISO-8601 date-times),
// "claude-billing" (Claude Code's x-anthropic-billing-header line).
//
// Thread safety: immutable after Parse; Apply may run on any thread.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "api/types.h"
#include "base/status.h"

namespace hearth::chat {

enum class StabilizeMode { kMoveToEnd, kDrop };

class Stabilizer {
 public:
  Stabilizer() = default;  // no rules: Apply changes nothing

  // `specs`: preset names, or "re:<ECMAScript regex>". Errors: kInvalidArgument naming
  // the unknown preset or the regex that does not compile.
  static StatusOr<Stabilizer> Parse(const std::vector<std::string>& specs, StabilizeMode mode);

  // Rewrites `messages` in place; returns how many spans it moved or dropped.
  int Apply(std::vector<api::Message>& messages) const;

  bool empty() const { return rules_.empty(); }

 private:
  struct Rule {
    std::string name;
    std::regex pattern;
  };
  std::vector<Rule> rules_;
  StabilizeMode mode_ = StabilizeMode::kMoveToEnd;
};

}  // namespace hearth::chat
