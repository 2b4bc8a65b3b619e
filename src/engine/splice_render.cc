#include "engine/splice_render.h"

#include <ctime>
#include <utility>

namespace hearth::engine {

// A rendering being remembered, or remembered. The conversation's fields are set before it
// is shared and never change; the rest is written once, before `done` is set under mu_, and
// read only by those who saw `done` set.
struct SpliceRender::Remembered {
  std::vector<ChatMessage> messages;  // the open ones hold the placeholder
  size_t n_open = 0;
  RenderOptions options;
  std::string day;

  bool done = false;    // guarded by mu_
  bool usable = false;  // set with done
  RenderedPrompt rendered;        // prompt cleared
  std::vector<std::string> cuts;  // rendered.prompt's pieces around the placeholders: n_open + 1
  std::vector<ChatMessage> stand_in;
  RenderedPrompt stand_in_rendered;  // prompt cleared
  std::vector<std::string> stand_in_cuts;
};

namespace {

std::string Today() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[16];
  return std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm));
}

// `text` cut at each occurrence of `placeholder`; nullopt unless there are exactly n of them.
std::optional<std::vector<std::string>> CutAt(const std::string& text, const std::string& placeholder, size_t n) {
  std::vector<std::string> cuts;
  size_t from = 0;
  for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, from)) {
    cuts.push_back(text.substr(from, at - from));
    from = at + placeholder.size();
  }
  cuts.push_back(text.substr(from));
  if (cuts.size() != n + 1) return std::nullopt;
  return cuts;
}

// What lies between `cuts` in `text`: text starts with the first, ends with the last, and
// holds each inner one exactly once between them, in order. nullopt otherwise (an inner
// cut that is empty, or shows twice, could part the text in more than one way).
std::optional<std::vector<std::string>> Between(const std::string& text, const std::vector<std::string>& cuts) {
  const std::string& head = cuts.front();
  const std::string& tail = cuts.back();
  if (text.size() < head.size() + tail.size() || !text.starts_with(head) || !text.ends_with(tail)) return std::nullopt;
  const size_t end = text.size() - tail.size();
  std::vector<std::string> between;
  size_t from = head.size();
  for (size_t i = 1; i + 1 < cuts.size(); ++i) {
    const std::string& cut = cuts[i];
    if (cut.empty()) return std::nullopt;
    const size_t at = text.find(cut, from);
    if (at == std::string::npos || at + cut.size() > end) return std::nullopt;
    const size_t again = text.find(cut, at + 1);
    if (again != std::string::npos && again + cut.size() <= end) return std::nullopt;
    between.push_back(text.substr(from, at - from));
    from = at + cut.size();
  }
  if (from > end) return std::nullopt;
  between.push_back(text.substr(from, end - from));
  return between;
}

std::string Join(const std::vector<std::string>& cuts, const std::vector<std::string>& between) {
  size_t size = 0;
  for (const auto& c : cuts) size += c.size();
  for (const auto& b : between) size += b.size();
  std::string out;
  out.reserve(size);
  for (size_t i = 0; i < between.size(); ++i) {
    out += cuts[i];
    out += between[i];
  }
  out += cuts.back();
  return out;
}

bool IsSystemRole(const std::string& role) { return role == "system" || role == "developer"; }

// The conversation's last turn: its leading system message, and the messages from the
// last user message before the open ones on (all of them where there is none).
std::vector<ChatMessage> StandIn(std::span<const ChatMessage> messages, size_t n_open) {
  size_t from = 0;
  for (size_t i = messages.size() - n_open; i-- > 0;) {
    if (messages[i].role == "user") {
      from = i;
      break;
    }
  }
  std::vector<ChatMessage> out;
  if (from > 0 && IsSystemRole(messages.front().role)) out.push_back(messages.front());
  out.insert(out.end(), messages.begin() + static_cast<std::ptrdiff_t>(from), messages.end());
  return out;
}

// Whether `m` is `open` but for its content.
bool SameButContent(const ChatMessage& m, const ChatMessage& open) {
  return m.role == open.role && m.reasoning_content == open.reasoning_content && m.tool_calls == open.tool_calls &&
         m.tool_call_id == open.tool_call_id && m.tool_name == open.tool_name;
}

}  // namespace

SpliceRender::SpliceRender(RenderFn render, size_t max_remembered)
    : render_(std::move(render)), max_remembered_(max_remembered) {}

SpliceRender::~SpliceRender() = default;

StatusOr<RenderedPrompt> SpliceRender::RenderAndRemember(std::span<const ChatMessage> messages,
                                                         const RenderOptions& options, size_t n_open) {
  if (n_open == 0 || n_open >= messages.size() || messages.back().content.empty()) return render_(messages, options);
  for (size_t i = messages.size() - n_open; i < messages.size(); ++i) {
    if (messages[i].content != messages.back().content) return render_(messages, options);
  }
  auto r = std::make_shared<Remembered>();
  r->messages.assign(messages.begin(), messages.end());
  r->n_open = n_open;
  r->options = options;
  r->day = Today();
  {
    std::lock_guard<std::mutex> lock(mu_);
    remembered_.push_front(r);
    while (remembered_.size() > max_remembered_) remembered_.pop_back();
  }
  // Waiters are woken however this ends, an exception included.
  bool usable = false;
  struct Done {
    const SpliceRender& splice;
    const std::shared_ptr<Remembered>& r;
    const bool& usable;
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(splice.mu_);
        r->done = true;
        r->usable = usable;
        if (!usable) std::erase(splice.remembered_, r);
      }
      splice.prepared_.notify_all();
    }
  } done{*this, r, usable};
  auto rendered = render_(messages, options);
  usable = rendered.ok() && Prepare(*r, *rendered);
  return rendered;
}

bool SpliceRender::Prepare(Remembered& r, const RenderedPrompt& rendered) const {
  const std::string& placeholder = r.messages.back().content;
  auto cuts = CutAt(rendered.prompt, placeholder, r.n_open);
  if (!cuts) return false;
  r.stand_in = StandIn(r.messages, r.n_open);
  auto stand_in = render_(r.stand_in, r.options);
  if (!stand_in.ok()) return false;
  auto stand_in_cuts = CutAt(stand_in->prompt, placeholder, r.n_open);
  if (!stand_in_cuts) return false;
  r.rendered = rendered;
  r.rendered.prompt.clear();
  r.cuts = std::move(*cuts);
  r.stand_in_rendered = std::move(*stand_in);
  r.stand_in_rendered.prompt.clear();
  r.stand_in_cuts = std::move(*stand_in_cuts);
  return true;
}

std::shared_ptr<const SpliceRender::Remembered> SpliceRender::Find(std::span<const ChatMessage> messages,
                                                                   const RenderOptions& options) const {
  std::deque<std::shared_ptr<Remembered>> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    candidates = remembered_;
  }
  for (const auto& r : candidates) {
    if (r->messages.size() != messages.size()) continue;
    const size_t first_open = messages.size() - r->n_open;
    bool same = true;
    for (size_t i = messages.size(); same && i-- > first_open;) same = SameButContent(messages[i], r->messages[i]);
    // The newest message first: conversations part there sooner than at their start.
    for (size_t i = first_open; same && i-- > 0;) same = messages[i] == r->messages[i];
    if (!same || options != r->options || r->day != Today()) continue;
    std::unique_lock<std::mutex> lock(mu_);
    prepared_.wait(lock, [&] { return r->done; });
    return r->usable ? r : nullptr;
  }
  return nullptr;
}

std::optional<RenderedPrompt> SpliceRender::Render(std::span<const ChatMessage> messages,
                                                   const RenderOptions& options) const {
  std::shared_ptr<const Remembered> r = Find(messages, options);
  if (!r) return std::nullopt;
  std::vector<ChatMessage> stand_in = r->stand_in;
  const size_t first_open = messages.size() - r->n_open;
  for (size_t i = 0; i < r->n_open; ++i) {
    stand_in[stand_in.size() - r->n_open + i].content = messages[first_open + i].content;
  }
  auto rendered = render_(stand_in, options);
  if (!rendered.ok()) return std::nullopt;
  auto between = Between(rendered->prompt, r->stand_in_cuts);
  rendered->prompt.clear();
  if (!between || *rendered != r->stand_in_rendered) return std::nullopt;
  RenderedPrompt out = r->rendered;
  out.prompt = Join(r->cuts, *between);
  std::lock_guard<std::mutex> lock(mu_);
  ++n_spliced_;
  return out;
}

size_t SpliceRender::n_spliced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_spliced_;
}

}  // namespace hearth::engine
