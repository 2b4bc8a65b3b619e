#include "chat/stabilizer.h"

#include <re2/re2.h>

namespace hearth::chat {
namespace {

struct Preset {
  const char* name;
  const char* pattern;
};

constexpr Preset kPresets[] = {
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"ulid", R"(\b[0-9A-HJKMNP-TV-Z]{26}\b)"},
    {"timestamp", R"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)"},
    {"claude-billing", R"(x-anthropic-billing-header:(?:[^;\n]*;)+ ?)"},
};

}  // namespace

StatusOr<Stabilizer> Stabilizer::Parse(const std::vector<std::string>& specs, StabilizeMode mode) {
  Stabilizer s;
  s.mode_ = mode;
  for (const auto& spec : specs) {
    std::string pattern;
    if (spec.starts_with("re:")) {
      pattern = spec.substr(3);
    } else {
      for (const auto& p : kPresets) {
        if (spec == p.name) pattern = p.pattern;
      }
      if (pattern.empty()) {
        return InvalidArgument("unknown --stabilize preset '" + spec +
                               "' (presets: uuid, ulid, timestamp, claude-billing; or re:REGEX)");
      }
    }
    RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_shared<const RE2>(pattern, options);
    if (!re->ok()) {
      return InvalidArgument("--stabilize '" + spec + "' is not a regular expression RE2 accepts (" + re->error() +
                             "; backreferences and lookaround are not supported)");
    }
    s.rules_.push_back({spec, std::move(re)});
  }
  return s;
}

int Stabilizer::Apply(std::vector<api::Message>& messages) const {
  if (rules_.empty() || messages.size() < 2) return 0;
  int n = 0;
  std::string moved;
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    for (const auto& rule : rules_) {
      std::string& text = messages[i].content;
      std::string kept;
      const re2::StringPiece whole(text);
      re2::StringPiece match;
      size_t last = 0;
      size_t from = 0;
      // Each search starts where the last match ended, with the whole text as context
      // (for \b and ^).
      while (from <= text.size() &&
             rule.pattern->Match(whole, from, text.size(), RE2::UNANCHORED, &match, 1)) {
        const size_t at = static_cast<size_t>(match.data() - whole.data());
        if (match.empty()) {
          from = at + 1;
          continue;
        }
        kept.append(text, last, at - last);
        moved.append(match.data(), match.size());
        moved += "\n";
        last = at + match.size();
        from = last;
        ++n;
      }
      if (last == 0) continue;
      kept.append(text, last, std::string::npos);
      text = std::move(kept);
    }
  }
  if (mode_ == StabilizeMode::kMoveToEnd && !moved.empty()) {
    std::string& tail = messages.back().content;
    if (!tail.empty() && !tail.ends_with("\n")) tail += "\n\n";
    moved.pop_back();
    tail += moved;
  }
  return n;
}

}  // namespace hearth::chat
