#include "server/shadow.h"

#include <algorithm>

#include "base/utf8.h"

namespace hearth::server {

std::optional<FinalShadow> FinalShadowTokens(const ShadowTarget& target, const api::Completion& reply,
                                             const std::function<std::vector<engine::Token>(const std::string&)>& tokenize) {
  if (!target.splice || target.content_start > target.tokens.size()) return std::nullopt;
  if (!reply.tool_calls.empty() || (target.reasoning_rendered && reply.reasoning != target.basis_reasoning) ||
      !reply.content.starts_with(target.basis_content)) {
    return std::nullopt;
  }
  const std::string_view rest = std::string_view(reply.content).substr(target.basis_content.size());
  if (!rest.empty()) {
    const char last = rest.back();
    if (last == ' ' || last == '\n' || last == '\t' || last == '\r') return std::nullopt;
    if (rest.find('<') != std::string_view::npos || rest.find('\x01') != std::string_view::npos) return std::nullopt;
    // A reply cut at its token limit can end inside a character; the client gets U+FFFD
    // there and sends that back.
    if (!IsValidUtf8(rest)) return std::nullopt;
  }
  FinalShadow out;
  out.tokens.assign(target.tokens.begin(), target.tokens.begin() + static_cast<std::ptrdiff_t>(target.content_start));
  // The template trims the content; before any came, all of it is the rest.
  std::string_view added = rest;
  if (target.content_rendered.empty()) added.remove_prefix(std::min(added.find_first_not_of(" \t\r\n"), added.size()));
  const std::string content = target.content_rendered + std::string(added);
  const auto own = tokenize(content + target.closing);
  out.tokens.insert(out.tokens.end(), own.begin(), own.end());
  // It must continue the target, as every later rendering does.
  if (out.tokens.size() < target.tokens.size() ||
      !std::equal(target.tokens.begin(), target.tokens.end(), out.tokens.begin())) {
    return std::nullopt;
  }
  const auto content_only = tokenize(content);
  if (content_only.size() <= own.size() && std::equal(content_only.begin(), content_only.end(), own.begin())) {
    out.content_end = target.content_start + content_only.size();
  }
  return out;
}

}  // namespace hearth::server
