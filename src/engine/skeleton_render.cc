#include "engine/skeleton_render.h"

#include <algorithm>
#include <cctype>

namespace hearth::engine {

namespace {

// The core's marker word: Restore finds every core by it, and a core a template changed
// (escaped its \x01, cut it, cased it) leaves the word without its frame.
constexpr std::string_view kWord = "hearth-standin-";

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }  // as Jinja's strip

bool Markup(const std::string& s) {
  const bool all_space = std::all_of(s.begin(), s.end(), IsSpace);
  const bool has_mark = std::any_of(s.begin(), s.end(), [](char c) {
    return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ');
  });
  return !s.empty() && !all_space && has_mark;
}

// The quoted literal starting at src[i] (a quote), unescaped; `*end` past its closing quote.
std::string ReadLiteral(std::string_view src, size_t i, size_t* end) {
  const char q = src[i];
  std::string out;
  size_t k = i + 1;
  while (k < src.size() && src[k] != q) {
    if (src[k] == '\\' && k + 1 < src.size()) {
      const char c = src[k + 1];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
      k += 2;
    } else {
      out += src[k++];
    }
  }
  *end = std::min(k + 1, src.size());
  return out;
}

}  // namespace

// Statements ({% %}) keep every markup literal: one may be assigned to a variable and
// tested against a text later. Expressions ({{ }}) keep those a text can be tested with:
// call arguments (startswith, split, replace, ...) and the left side of `in`; the rest
// there is output (separators, headers), which no text is compared with.
SkeletonGuard::SkeletonGuard(std::string_view src) {
  size_t i = 0;
  while ((i = src.find('{', i)) != std::string_view::npos) {
    if (i + 1 >= src.size()) break;
    const char kind = src[i + 1];
    if (kind != '{' && kind != '%' && kind != '#') {
      ++i;
      continue;
    }
    const std::string_view close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t j = i + 2;
    while (j < src.size() && src.substr(j, 2) != close) {
      if (kind == '#' || (src[j] != '\'' && src[j] != '"')) {
        ++j;
        continue;
      }
      size_t end = 0;
      std::string lit = ReadLiteral(src, j, &end);
      size_t b = j;
      while (b > 0 && IsSpace(src[b - 1])) --b;
      const bool argument = b > 0 && (src[b - 1] == '(' || src[b - 1] == ',' || src[b - 1] == '[');
      size_t a = end;
      while (a < src.size() && IsSpace(src[a])) ++a;
      const std::string_view rest = src.substr(a);
      const bool tested_in = (rest.starts_with("in") || rest.starts_with("not")) && a > end;
      if ((kind == '%' || argument || tested_in) && Markup(lit) &&
          std::find(literals_.begin(), literals_.end(), lit) == literals_.end()) {
        literals_.push_back(std::move(lit));
      }
      j = end;
    }
    i = j + 2;
  }
  literals_.emplace_back(kWord);
  for (const auto& l : literals_) first_char_[static_cast<unsigned char>(l[0])] = true;
}

bool SkeletonGuard::Inert(std::string_view text) const {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_char_[static_cast<unsigned char>(text[i])]) continue;
    const std::string_view rest = text.substr(i);
    for (const auto& l : literals_) {
      if (l[0] == text[i] && rest.starts_with(l)) return false;
    }
  }
  return true;
}

std::string StandIn(const std::string& text, const SkeletonGuard& guard, std::vector<Standin>* standins) {
  if (text.size() < kMinStandinBytes) return text;
  size_t lead = 0;
  while (lead < text.size() && IsSpace(text[lead])) ++lead;
  if (lead == text.size()) return text;
  size_t trail = 0;
  while (IsSpace(text[text.size() - 1 - trail])) ++trail;
  if (!guard.Inert(text)) return text;
  std::string core = "\x01" + std::string(kWord) + std::to_string(standins->size()) + "\x01";
  std::string out = text.substr(0, lead) + core + text.substr(text.size() - trail);
  standins->push_back({std::move(core), text.substr(lead, text.size() - lead - trail)});
  return out;
}

std::optional<std::string> Restore(std::string_view rendered, const std::vector<Standin>& standins) {
  std::string out;
  size_t reserve = rendered.size();
  for (const auto& s : standins) reserve += s.inner.size();
  out.reserve(reserve);
  size_t pos = 0;
  while (true) {
    const size_t at = rendered.find(kWord, pos);
    if (at == std::string_view::npos) break;
    // A whole core: \x01, the word, the index, \x01.
    if (at == 0 || rendered[at - 1] != '\x01' || at - 1 < pos) return std::nullopt;
    size_t k = at + kWord.size();
    size_t id = 0;
    const size_t digits = k;
    while (k < rendered.size() && std::isdigit(static_cast<unsigned char>(rendered[k]))) id = id * 10 + (rendered[k++] - '0');
    if (k == digits || k >= rendered.size() || rendered[k] != '\x01' || id >= standins.size()) return std::nullopt;
    if (rendered.substr(at - 1, k + 1 - (at - 1)) != standins[id].core) return std::nullopt;  // e.g. "007"
    out.append(rendered.substr(pos, at - 1 - pos));
    out.append(standins[id].inner);
    pos = k + 1;
  }
  out.append(rendered.substr(pos));
  return out;
}

bool HasMarker(std::string_view text) { return text.find(kWord) != std::string_view::npos; }

}  // namespace hearth::engine
