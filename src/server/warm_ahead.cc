#include "server/warm_ahead.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>

#include "cache/snapshot_policy.h"

namespace hearth::server {
namespace {

constexpr size_t kMaxPendingJobs = 8;

// Whether this client sends reasoning back with past assistant turns: Anthropic clients
// return thinking blocks; OpenAI clients usually drop reasoning_content, unless this
// conversation shows they keep it.
bool SendsReasoningBack(const api::GenerationRequest& request) {
  if (request.flavor == api::Flavor::kAnthropic) return true;
  return std::any_of(request.messages.begin(), request.messages.end(),
                     [](const api::Message& m) { return m.role == "assistant" && !m.reasoning_content.empty(); });
}

using engine::CommonPrefix;

constexpr char kPlaceholder[] = "hearth warm-ahead placeholder one";

}  // namespace

api::GenerationRequest NextRequest(const api::GenerationRequest& request, const api::Completion& reply,
                                   const std::string& placeholder) {
  api::GenerationRequest next = request;
  api::Message said;
  said.role = "assistant";
  said.content = reply.content;
  if (SendsReasoningBack(request)) said.reasoning_content = reply.reasoning;
  said.tool_calls = reply.tool_calls;
  next.messages.push_back(said);
  if (reply.tool_calls.empty()) {
    next.messages.push_back({.role = "user", .content = placeholder});
  } else {
    for (const auto& call : reply.tool_calls) {
      next.messages.push_back({.role = "tool", .content = placeholder, .tool_call_id = call.id, .tool_name = call.name});
    }
  }
  return next;
}

namespace {

// Renders the next request with a given reply, as prompt text; and tokenizes such text.
using Renderer = std::function<std::optional<std::string>(const api::Completion&)>;
using Tokenizer = std::function<std::vector<engine::Token>(const std::string&)>;

constexpr char kProbe = '\x01';

// Where the reply's content sits in `with_probe` (a rendering with one probe character,
// right after the content), for FinalShadowTokens: the text from the probe to the
// placeholder closes the reply, and the content's tokens start at the place in `base`
// (the rendering's tokens without the probe) where the content, that closing and the
// placeholder, tokenized on their own, appear. Finding them there shows the template
// writes the content as it is (leading whitespace trimmed) and that the tokens part
// where it starts and where the placeholder starts. Leaves `target` without a splice
// otherwise.
void FindContentSplice(const std::string& with_probe, const std::vector<engine::Token>& base, const std::string& content,
                       const Tokenizer& tokenize, ShadowTarget& target) {
  const size_t probe = with_probe.find(kProbe);
  if (probe == std::string::npos) return;
  const size_t first = content.find_first_not_of(" \t\r\n");
  const std::string_view lead = first == std::string::npos ? std::string_view() : std::string_view(content).substr(first);
  if (probe < lead.size() || with_probe.compare(probe - lead.size(), lead.size(), lead) != 0) return;
  const size_t placeholder = with_probe.find(kPlaceholder, probe);
  if (placeholder == std::string::npos) return;
  std::string closing = with_probe.substr(probe + 1, placeholder - probe - 1);
  const auto own = tokenize(std::string(lead) + closing + kPlaceholder);
  if (own.empty() || own.size() > base.size()) return;
  for (size_t i = base.size() - own.size() + 1; i-- > 0;) {
    if (!std::equal(own.begin(), own.end(), base.begin() + static_cast<std::ptrdiff_t>(i))) continue;
    if (i > target.tokens.size()) return;
    target.splice = true;
    target.content_start = i;
    target.content_rendered = lead;
    target.closing = std::move(closing);
    return;
  }
}

// PlanShadow over any way of rendering the next request with a given reply.
std::optional<ShadowTarget> PlanShadowWith(const Renderer& render, const Tokenizer& tokenize,
                                           const api::Completion& partial) {
  api::Completion r = partial;
  r.finish_reason = api::FinishReason::kStop;
  // Tool calls come last; their arguments are re-serialized when the reply is complete.
  // Before them, content and reasoning are final, and the next message is a tool result.
  for (auto& call : r.tool_calls) call.arguments = "{}";
  const bool content_growing = r.tool_calls.empty() && !r.content.empty();
  const bool reasoning_growing = r.tool_calls.empty() && r.content.empty();
  if (content_growing) r.content.resize(StableTextLength(r.content));
  if (reasoning_growing) r.reasoning.resize(StableTextLength(r.reasoning));
  if (r.content.find(kProbe) != std::string::npos || r.reasoning.find(kProbe) != std::string::npos) return std::nullopt;
  // Where the text ends in token space: one more character after the content (and after
  // the reasoning while it grows) changes the tokens from there on. One render carries
  // the probe characters; without them it is the plain rendering (the text before a
  // probe ends in a non-space, which the template's trimming leaves alone).
  api::Completion probed = r;
  probed.content += kProbe;
  if (reasoning_growing) probed.reasoning += kProbe;
  auto with_probes = render(probed);
  if (!with_probes) return std::nullopt;
  std::string plain = *with_probes;
  plain.erase(std::remove(plain.begin(), plain.end(), kProbe), plain.end());
  const size_t n_probes = with_probes->size() - plain.size();
  if (n_probes == 0 || n_probes > 2) return std::nullopt;  // a template that drops or repeats them
  const auto base = tokenize(plain);
  size_t end = CommonPrefix(base, tokenize(*with_probes));
  // After anything but a plain letter or digit, the last token may still merge with
  // what follows (".\n" is one token).
  // While the reasoning grows but the template drops it (one probe: the content's), or
  // nothing of the growing text is stable yet, the target ends where that text will
  // start, after template text that stays as it is.
  const bool reasoning_dropped = reasoning_growing && n_probes == 1;
  const std::string& cut = content_growing ? r.content : r.reasoning;
  const bool word_end = !cut.empty() && std::isalnum(static_cast<unsigned char>(cut.back())) != 0;
  if (!word_end && !cut.empty() && !reasoning_dropped) end = end > 0 ? end - 1 : 0;
  if (end == 0) return std::nullopt;
  ShadowTarget target;
  target.tokens.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(end));
  target.basis_content = r.content;
  target.basis_reasoning = r.reasoning;
  target.reasoning_rendered = !reasoning_dropped;
  if ((content_growing && n_probes == 1) || reasoning_dropped) {
    FindContentSplice(*with_probes, base, r.content, tokenize, target);
  }
  return target;
}

Renderer RendererFor(const RequestBuilder& builder, const api::GenerationRequest& request) {
  return [&builder, &request](const api::Completion& c) -> std::optional<std::string> {
    auto out = builder.RenderText(NextRequest(request, c, kPlaceholder));
    if (!out) return std::nullopt;
    return std::move(*out);
  };
}

Tokenizer TokenizerFor(const RequestBuilder& builder) {
  return [&builder](const std::string& text) { return builder.TokenizeRendered(text); };
}

// The conversation from its last user message on, after the first message when that is
// a system prompt (which carries the tool definitions).
api::GenerationRequest TailOf(const api::GenerationRequest& request) {
  api::GenerationRequest tail = request;
  tail.messages.clear();
  size_t last_user = 0;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    if (request.messages[i].role == "user") last_user = i;
  }
  if (last_user > 0 && request.messages[0].role == "system") tail.messages.push_back(request.messages[0]);
  tail.messages.insert(tail.messages.end(), request.messages.begin() + static_cast<std::ptrdiff_t>(last_user),
                       request.messages.end());
  return tail;
}

}  // namespace

std::optional<ShadowTarget> PlanShadow(const RequestBuilder& builder, const api::GenerationRequest& request,
                                       const api::Completion& partial) {
  if (request.messages.empty() || request.prompt) return std::nullopt;
  return PlanShadowWith(RendererFor(builder, request), TokenizerFor(builder), partial);
}

ShadowPlanner::ShadowPlanner(const RequestBuilder& builder, std::shared_ptr<const api::GenerationRequest> request,
                             std::vector<engine::Token> prompt)
    : builder_(builder), request_(std::move(request)), prompt_(std::move(prompt)), tail_(TailOf(*request_)) {
  tail_differs_ = tail_.messages.size() < request_->messages.size();
}

std::optional<ShadowTarget> ShadowPlanner::Plan(const api::Completion& partial) {
  if (!tail_checked_) {
    auto full = PlanShadow(builder_, *request_, partial);
    if (!tail_differs_ || !full) return full;
    // The first target goes out after one render (a reply cut off early still finds
    // one); the tail is checked from the next on.
    if (!first_planned_) {
      first_planned_ = true;
      return full;
    }
    auto tail = PlanShadowWith(RendererFor(builder_, tail_), TokenizerFor(builder_), partial);
    // The tail renders the reply as the whole conversation does when the tokens after the
    // history agree; checked once there is something after it.
    const size_t history = CommonPrefix(full->tokens, prompt_);
    const size_t after = full->tokens.size() - history;
    if (!tail || after == 0) return full;
    tail_checked_ = true;
    if (tail->tokens.size() >= after &&
        std::equal(tail->tokens.end() - static_cast<std::ptrdiff_t>(after), tail->tokens.end(),
                   full->tokens.begin() + static_cast<std::ptrdiff_t>(history))) {
      history_.assign(prompt_.begin(), prompt_.begin() + static_cast<std::ptrdiff_t>(history));
      tail_history_.assign(tail->tokens.begin(), tail->tokens.end() - static_cast<std::ptrdiff_t>(after));
      use_tail_ = true;
    }
    return full;
  }
  if (!use_tail_) return PlanShadow(builder_, *request_, partial);
  auto tail = PlanShadowWith(RendererFor(builder_, tail_), TokenizerFor(builder_), partial);
  if (!tail) return std::nullopt;
  if (tail->tokens.size() < tail_history_.size() ||
      !std::equal(tail_history_.begin(), tail_history_.end(), tail->tokens.begin())) {
    return PlanShadow(builder_, *request_, partial);
  }
  ShadowTarget out;
  out.tokens = history_;
  out.tokens.insert(out.tokens.end(), tail->tokens.begin() + static_cast<std::ptrdiff_t>(tail_history_.size()),
                    tail->tokens.end());
  out.basis_content = std::move(tail->basis_content);
  out.basis_reasoning = std::move(tail->basis_reasoning);
  out.reasoning_rendered = tail->reasoning_rendered;
  if (tail->splice && tail->content_start >= tail_history_.size()) {
    out.splice = true;
    out.content_start = tail->content_start - tail_history_.size() + history_.size();
    out.content_rendered = std::move(tail->content_rendered);
    out.closing = std::move(tail->closing);
  }
  return out;
}

std::optional<WarmAheadTask> PlanWarmAhead(const RequestBuilder& builder, const api::GenerationRequest& request,
                                            const api::Completion& reply) {
  if (request.messages.empty() || request.prompt) return std::nullopt;
  // The next message's own content starts where the rendering's tokens start to depend
  // on the placeholder: where the tokens of the text before it part from the whole
  // rendering's. A template that does not show the placeholder verbatim gets a second
  // render with another placeholder instead (their common prefix ends there too).
  // Remembered, so that the next request's render splices its own messages in.
  const size_t n_open = reply.tool_calls.empty() ? 1 : reply.tool_calls.size();
  auto a = builder.Render(NextRequest(request, reply, kPlaceholder), n_open);
  if (!std::holds_alternative<BuildResult>(a)) return std::nullopt;
  const BuildResult& built = std::get<BuildResult>(a);
  const auto& ta = built.task;
  size_t common = 0;
  if (const size_t at = built.prompt_text.find(kPlaceholder); at != std::string::npos) {
    common = CommonPrefix(builder.TokenizeRendered(built.prompt_text.substr(0, at)), ta.prompt);
  } else {
    auto b = builder.Render(NextRequest(request, reply, "HEARTH WARM-AHEAD PLACEHOLDER TWO"));
    if (!std::holds_alternative<BuildResult>(b)) return std::nullopt;
    common = CommonPrefix(ta.prompt, std::get<BuildResult>(b).task.prompt);
  }
  if (common < 2) return std::nullopt;
  WarmAheadTask task;
  task.prompt.assign(ta.prompt.begin(), ta.prompt.begin() + static_cast<std::ptrdiff_t>(common));
  std::optional<int32_t> cut_content_end;
  if (reply.finish_reason == api::FinishReason::kCancelled && !reply.content.empty()) {
    // Where the reply's content ends in token space: the renders with and without one
    // more character part there.
    api::Completion longer = reply;
    longer.content += "\x01";
    auto c = builder.Render(NextRequest(request, longer, kPlaceholder));
    if (std::holds_alternative<BuildResult>(c)) {
      const auto& tc = std::get<BuildResult>(c).task.prompt;
      cut_content_end = static_cast<int32_t>(CommonPrefix(tc, ta.prompt));
    }
  }
  // A reply cut off mid-stream comes back as what the client read, which may end a few
  // tokens before what the server sent: each of its last positions keeps a state.
  auto kept =
      cache::SnapshotPolicy::WarmAheadPositions(ta.snapshot_positions, static_cast<int32_t>(common), cut_content_end);
  task.snapshot_positions = std::move(kept.positions);
  task.max_resume = kept.max_resume;
  task.cache_namespace = builder.CacheNamespace(request.cache_salt);
  return task;
}

WarmAhead::WarmAhead(const RequestBuilder& builder, EngineLoop& engine)
    : builder_(builder), engine_(engine), thread_([this] { Run(); }) {}

WarmAhead::~WarmAhead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WarmAhead::OnFinished(const GenerationTask& task, const api::Completion& reply) {
  if (!task.request) return;
  Push({task.request, reply, nullptr, task.prompt, std::chrono::steady_clock::now()});
}

void WarmAhead::OnProgress(const GenerationTask& task, const api::Completion& partial,
                           std::shared_ptr<ShadowMailbox> mailbox) {
  if (!task.request) {
    mailbox->Skip();
    return;
  }
  // The planner lives in the mailbox and is touched by the worker only; while a render
  // is in flight (busy) no second job for this mailbox exists.
  const bool mailbox_has_planner = mailbox->planner != nullptr;
  Push({task.request, partial, std::move(mailbox), mailbox_has_planner ? std::vector<engine::Token>{} : task.prompt});
}

void WarmAhead::Push(Job job) {
  std::shared_ptr<ShadowMailbox> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.size() >= kMaxPendingJobs) {
      dropped = std::move(jobs_.front().mailbox);
      jobs_.pop_front();
    }
    jobs_.push_back(std::move(job));
  }
  if (dropped) dropped->Skip();
  cv_.notify_one();
}

void WarmAhead::Run() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) {
        for (auto& j : jobs_) {
          if (j.mailbox) j.mailbox->Skip();
        }
        return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    // A job that throws (a template error on odd history, memory) is skipped; the
    // thread goes on with the next.
    try {
      RunJob(job);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hearth: warm-ahead job failed: %s\n", e.what());
      if (job.mailbox) job.mailbox->Skip();
    } catch (...) {
      std::fprintf(stderr, "hearth: warm-ahead job failed\n");
      if (job.mailbox) job.mailbox->Skip();
    }
  }
}

void WarmAhead::RunJob(Job& job) {
  if (job.mailbox) {
    if (!job.mailbox->planner) {
      job.mailbox->planner = std::make_shared<ShadowPlanner>(builder_, job.request, std::move(job.prompt));
    }
    auto target = job.mailbox->planner->Plan(job.reply);
    if (target) {
      target->message_ends = builder_.MessageEnds(target->tokens);
      job.mailbox->Publish(std::move(*target));
    } else {
      job.mailbox->Skip();
    }
  } else if (auto task = PlanWarmAhead(builder_, *job.request, job.reply)) {
    task->fork = static_cast<int32_t>(CommonPrefix(task->prompt, job.prompt));
    task->reply_ended = job.ended;
    (void)engine_.Submit(std::move(*task));
  }
}

}  // namespace hearth::server
