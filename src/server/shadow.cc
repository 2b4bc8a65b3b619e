#include "server/shadow.h"

#include <algorithm>

namespace hearth::server {

std::optional<std::vector<engine::Token>> FinalShadowTokens(
    const ShadowTarget& target, const api::Completion& reply,
    const std::function<std::vector<engine::Token>(const std::string&)>& tokenize) {
  if (target.content_rendered.empty() || target.content_start > target.tokens.size()) return std::nullopt;
  if (!reply.tool_calls.empty() || reply.reasoning != target.basis_reasoning ||
      !reply.content.starts_with(target.basis_content)) {
    return std::nullopt;
  }
  const std::string_view rest = std::string_view(reply.content).substr(target.basis_content.size());
  if (!rest.empty()) {
    const char last = rest.back();
    if (last == ' ' || last == '\n' || last == '\t' || last == '\r') return std::nullopt;
    if (rest.find('<') != std::string_view::npos || rest.find('\x01') != std::string_view::npos) return std::nullopt;
  }
  std::vector<engine::Token> out(target.tokens.begin(),
                                 target.tokens.begin() + static_cast<std::ptrdiff_t>(target.content_start));
  const auto own = tokenize(target.content_rendered + std::string(rest) + target.closing);
  out.insert(out.end(), own.begin(), own.end());
  // It must continue the target, as every later rendering does.
  if (out.size() < target.tokens.size() || !std::equal(target.tokens.begin(), target.tokens.end(), out.begin())) {
    return std::nullopt;
  }
  return out;
}

}  // namespace hearth::server
