#include "server/shadow.h"

#include <algorithm>

#include "base/utf8.h"

namespace hearth::server {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// How the template renders `content` as the reply's content, continued from what the
// target was rendered from: the basis and what came after it (trimmed before any
// content came), or the basis cut short (a cut-off reply whose client read less than
// the target was rendered from). nullopt where the template may render it otherwise:
// trailing whitespace (trimmed), markup ('<') after the basis or a cut inside it, or a
// cut inside a character (the client gets U+FFFD there and sends that back).
std::optional<std::string> RenderedContent(const ShadowTarget& target, std::string_view content) {
  const std::string_view basis = target.basis_content;
  if (!content.empty() && IsSpace(content.back())) return std::nullopt;
  if (content.starts_with(basis)) {
    std::string_view rest = content.substr(basis.size());
    if (rest.find('<') != std::string_view::npos || rest.find('\x01') != std::string_view::npos) return std::nullopt;
    if (!IsValidUtf8(rest)) return std::nullopt;
    if (target.content_rendered.empty()) rest.remove_prefix(std::min(rest.find_first_not_of(" \t\r\n"), rest.size()));
    return target.content_rendered + std::string(rest);
  }
  if (!basis.starts_with(content) || !IsValidUtf8(content)) return std::nullopt;
  if (const size_t open = content.rfind('<'); open != std::string_view::npos && content.find('>', open) == std::string_view::npos) {
    return std::nullopt;
  }
  // content_rendered is the basis without its leading whitespace.
  const size_t lead = basis.size() - target.content_rendered.size();
  if (target.content_rendered.empty() || content.size() <= lead) return std::nullopt;
  return std::string(content.substr(lead));
}

}  // namespace

std::optional<FinalShadow> FinalShadowTokens(const ShadowTarget& target, const api::Completion& reply,
                                             const std::function<std::vector<engine::Token>(const std::string&)>& tokenize) {
  if (!target.splice || target.content_start > target.tokens.size()) return std::nullopt;
  if (!reply.tool_calls.empty() || (target.reasoning_rendered && reply.reasoning != target.basis_reasoning)) {
    return std::nullopt;
  }
  const auto content = RenderedContent(target, reply.content);
  if (!content) return std::nullopt;
  FinalShadow out;
  const auto start = target.tokens.begin() + static_cast<std::ptrdiff_t>(target.content_start);
  out.tokens.assign(target.tokens.begin(), start);
  const auto own = tokenize(*content + target.closing);
  out.tokens.insert(out.tokens.end(), own.begin(), own.end());
  // It must continue the target, as every later rendering does; a shorter reply, as far
  // as its own text is stable (StableTextLength), which the target holds.
  if (reply.content.size() >= target.basis_content.size()) {
    if (out.tokens.size() < target.tokens.size() || !std::equal(target.tokens.begin(), target.tokens.end(), out.tokens.begin())) {
      return std::nullopt;
    }
  } else {
    const auto stable = tokenize(content->substr(0, StableTextLength(*content)));
    const auto held = static_cast<size_t>(target.tokens.end() - start);
    if (stable.size() > held || stable.size() > own.size() || !std::equal(stable.begin(), stable.end(), start) ||
        !std::equal(stable.begin(), stable.end(), own.begin())) {
      return std::nullopt;
    }
  }
  const auto content_only = tokenize(*content);
  if (content_only.size() <= own.size() && std::equal(content_only.begin(), content_only.end(), own.begin())) {
    out.content_end = target.content_start + content_only.size();
  }
  return out;
}

}  // namespace hearth::server
