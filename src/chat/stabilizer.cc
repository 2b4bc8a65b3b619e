#include "chat/stabilizer.h"

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
    try {
      s.rules_.push_back({spec, std::regex(pattern, std::regex::ECMAScript | std::regex::optimize)});
    } catch (const std::regex_error& e) {
      return InvalidArgument("--stabilize '" + spec + "' is not a valid regular expression: " + e.what());
    }
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
      auto begin = std::sregex_iterator(text.begin(), text.end(), rule.pattern);
      size_t last = 0;
      for (auto it = begin; it != std::sregex_iterator(); ++it) {
        if (it->length() == 0) continue;
        kept.append(text, last, static_cast<size_t>(it->position()) - last);
        moved += it->str() + "\n";
        last = static_cast<size_t>(it->position() + it->length());
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
