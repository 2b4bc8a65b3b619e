// Skeleton rendering: the pieces that let ChatTemplate render a long conversation at the
// cost of a short one.
//
// A chat template walks the messages and writes each text out, usually untouched; the
// Jinja renderer's cost grows with the texts (three renders per request inside llama.cpp's
// chat library). A skeleton stands each long text in by a short placeholder (the text's
// own leading and trailing whitespace around a unique core), is rendered, and gets the
// texts put back where their cores came out.
//
// That equals the full render only while the template treats the texts as opaque: it may
// write them, trim or strip them, and test them against its own string literals, but not
// look inside them otherwise. Two guards stand for that here:
//   1. A text is stood in only when it holds none of the template's markup literals (any
//      quoted string in a Jinja tag with a character outside [A-Za-z0-9_ ] that is not all
//      whitespace: "</think>", "<tool_call>", ...), so every test against one gives the
//      same answer for the text and its placeholder; nor the placeholder's own marker.
//   2. Restore refuses a render in which a core came out changed (escaped, cut, cased):
//      the marker then survives outside a whole core.
// What these cannot see (a template that counts a text's characters, or splits it at
// newlines) ChatTemplate's audit catches: it compares skeleton and full renders on real
// traffic before trusting the skeleton, and again now and then (chat_template.h).
//
// Thread safety: a SkeletonGuard is immutable after construction; all functions are pure.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::engine {

// The template's markup literals (guard 1), scanned from its source once.
class SkeletonGuard {
 public:
  explicit SkeletonGuard(std::string_view template_source);
  // Whether `text` may be stood in by a placeholder.
  bool Inert(std::string_view text) const;
  const std::vector<std::string>& literals() const { return literals_; }

 private:
  std::vector<std::string> literals_;
  bool first_char_[256] = {};
};

// One stood-in text: what the skeleton holds, and what Restore puts back in its place.
struct Standin {
  std::string core;   // the placeholder without the text's own outer whitespace
  std::string inner;  // the text without its outer whitespace
};

// Texts shorter than this stay in the skeleton as they are (they cost little to render).
inline constexpr size_t kMinStandinBytes = 64;

// The placeholder for `text` (its outer whitespace around a new core), recording the pair
// in `standins`; `text` itself when it is short, not inert, or all whitespace.
std::string StandIn(const std::string& text, const SkeletonGuard& guard, std::vector<Standin>* standins);

// `rendered` with every core replaced by its text; nullopt when a core's marker appears
// anywhere but in a whole core (guard 2).
std::optional<std::string> Restore(std::string_view rendered, const std::vector<Standin>& standins);

// Whether `text` carries a placeholder marker at all (output formats, stop strings).
bool HasMarker(std::string_view text);

}  // namespace hearth::engine
