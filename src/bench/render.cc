#include "bench/render.h"

#include <algorithm>

#include "bench/client.h"
#include "bench/wire.h"

namespace hearth::bench {
namespace {

// Backs a snippet boundary off a UTF-8 continuation byte so snippets stay valid text.
size_t CharStart(const std::string& s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

std::string Snippet(const std::string& s, size_t from, size_t n) {
  from = CharStart(s, std::min(from, s.size()));
  size_t to = std::min(s.size(), from + n);
  while (to < s.size() && (static_cast<unsigned char>(s[to]) & 0xC0) == 0x80) ++to;
  return s.substr(from, to - from);
}

}  // namespace

StatusOr<std::string> HttpRenderBackend::ApplyTemplate(const Json& body) {
  auto r = client_->PostJson("/apply-template", body);
  if (!r.ok()) return r.status();
  if (!r->contains("prompt") || !(*r)["prompt"].is_string()) {
    return InvalidArgument("/apply-template answered without a \"prompt\" string");
  }
  return (*r)["prompt"].get<std::string>();
}

StatusOr<int> HttpRenderBackend::CountTokens(const std::string& text) {
  auto r = client_->PostJson("/tokenize", Json{{"content", text}, {"add_special", false}, {"parse_special", true}});
  if (!r.ok()) return r.status();
  if (!r->contains("tokens") || !(*r)["tokens"].is_array()) return InvalidArgument("/tokenize answered without \"tokens\"");
  return static_cast<int>((*r)["tokens"].size());
}

int NewTokens(int n_prompt, int n_carried) { return std::max(0, n_prompt - n_carried); }

std::optional<size_t> CarriedEnd(const std::string& prompt, const std::string& carried) {
  if (prompt.starts_with(carried)) return carried.size();
  const size_t differ = static_cast<size_t>(
      std::mismatch(carried.begin(), carried.end(), prompt.begin(), prompt.end()).first - carried.begin());
  constexpr size_t kMinTail = 12, kMaxTail = 64;
  for (size_t len = std::min(carried.size() - differ, kMaxTail); len >= kMinTail; --len) {
    // It may begin before the difference (an emptied message keeps its glue), but must
    // end past it.
    const std::string_view tail = std::string_view(carried).substr(carried.size() - len);
    for (size_t at = prompt.find(tail, differ > len ? differ - len : 0); at != std::string::npos;
         at = prompt.find(tail, at + 1)) {
      if (at + len > differ) return at + len;
    }
  }
  return std::nullopt;
}

Status NewTokenCounter::Probe() {
  const std::vector<Json> msgs = {Json{{"role", "user"}, {"content", "Hello there."}}};
  auto with = backend_->ApplyTemplate(RenderBody(msgs, Json::array(), std::nullopt, true));
  if (!with.ok()) return with.status();
  auto without = backend_->ApplyTemplate(RenderBody(msgs, Json::array(), std::nullopt, false));
  if (!without.ok()) return without.status();
  honours_agp_ = *with != *without;
  const std::vector<Json> closed = {msgs[0], Json{{"role", "assistant"}, {"content", "Hi, how can I help?"}}};
  auto reply = backend_->ApplyTemplate(RenderBody(closed, Json::array(), std::nullopt, false));
  if (!reply.ok()) return reply.status();
  continues_final_ = reply->ends_with("help?");
  return Status::Ok();
}

StatusOr<int> NewTokenCounter::Tokens(const std::string& text) {
  if (auto it = token_cache_.find(text); it != token_cache_.end()) return it->second;
  auto n = backend_->CountTokens(text);
  if (!n.ok()) return n.status();
  if (token_cache_.size() > 256) token_cache_.clear();
  token_cache_[text] = *n;
  return *n;
}

StatusOr<TurnTokens> NewTokenCounter::Count(const std::vector<Json>& messages, const Json& tools,
                                            std::optional<bool> thinking, int n_carried) {
  TurnTokens out;
  auto full = backend_->ApplyTemplate(RenderBody(messages, tools, thinking, true));
  if (!full.ok()) return full.status();
  auto n_full = Tokens(*full);
  if (!n_full.ok()) return n_full.status();
  out.prompt_text = std::move(*full);
  out.n_prompt = *n_full;
  if (n_carried > 0) {
    const std::vector<Json> carried(messages.begin(), messages.begin() + std::min<size_t>(n_carried, messages.size()));
    auto text = backend_->ApplyTemplate(RenderBody(carried, tools, thinking, false));
    if (!text.ok()) return text.status();
    // The carried messages as this request renders them (shorter when the template drops
    // what later messages make obsolete), else as rendered on their own.
    const auto end = CarriedEnd(out.prompt_text, *text);
    auto n = Tokens(end ? out.prompt_text.substr(0, *end) : *text);
    if (!n.ok()) return n.status();
    out.n_carried = *n;
  }
  out.n_new = NewTokens(out.n_prompt, out.n_carried);
  return out;
}

PromptDiff DiffPrompts(const std::string& prev, const std::string& next) {
  PromptDiff d;
  const size_t n = std::min(prev.size(), next.size());
  size_t i = 0;
  while (i < n && prev[i] == next[i]) ++i;
  if (i < n) i = CharStart(prev, i);  // report whole characters
  d.offset = i;
  d.prev_is_prefix = i == prev.size();
  const size_t from = i > 60 ? i - 60 : 0;
  d.context = Snippet(prev, from, i - from);
  d.prev_text = Snippet(prev, i, 60);
  d.next_text = Snippet(next, i, 60);
  return d;
}

std::string EscapeForLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '|': out += "\\|"; break;  // keeps Markdown tables intact
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace hearth::bench
