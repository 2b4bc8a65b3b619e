#include "server/warm_ahead.h"

#include <algorithm>

namespace hearth::server {
namespace {

constexpr size_t kMaxPendingJobs = 8;
// A reply cut off mid-stream comes back as what the client read, which may end a few
// tokens before what the server sent: snapshot each of the reply's last positions.
constexpr int32_t kCutOffSnapshots = 8;

// Whether this client sends reasoning back with past assistant turns: Anthropic clients
// return thinking blocks; OpenAI clients usually drop reasoning_content, unless this
// conversation shows they keep it.
bool SendsReasoningBack(const api::GenerationRequest& request) {
  if (request.flavor == api::Flavor::kAnthropic) return true;
  return std::any_of(request.messages.begin(), request.messages.end(),
                     [](const api::Message& m) { return m.role == "assistant" && !m.reasoning_content.empty(); });
}

// The conversation as the next request will carry it, ending with placeholder messages
// whose content is `placeholder`.
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

}  // namespace

std::optional<GenerationTask> PlanWarmAhead(const RequestBuilder& builder, const api::GenerationRequest& request,
                                            const api::Completion& reply) {
  if (request.messages.empty() || request.prompt) return std::nullopt;
  // Two renders that differ only in the placeholder's text: their common token prefix
  // ends where the next message's own content starts.
  auto a = builder.Render(NextRequest(request, reply, "hearth warm-ahead placeholder one"));
  auto b = builder.Render(NextRequest(request, reply, "HEARTH WARM-AHEAD PLACEHOLDER TWO"));
  if (!std::holds_alternative<BuildResult>(a) || !std::holds_alternative<BuildResult>(b)) return std::nullopt;
  const auto& ta = std::get<BuildResult>(a).task;
  const auto& tb = std::get<BuildResult>(b).task;
  size_t common = 0;
  while (common < ta.prompt.size() && common < tb.prompt.size() && ta.prompt[common] == tb.prompt[common]) ++common;
  if (common < 2) return std::nullopt;
  GenerationTask task;
  task.background = true;
  task.prompt.assign(ta.prompt.begin(), ta.prompt.begin() + static_cast<std::ptrdiff_t>(common));
  for (int32_t p : ta.snapshot_positions) {
    if (p < static_cast<int32_t>(common)) task.snapshot_positions.push_back(p);
  }
  task.snapshot_positions.push_back(static_cast<int32_t>(common));
  if (reply.finish_reason == api::FinishReason::kCancelled && !reply.content.empty()) {
    // Where the reply's content ends in token space: the renders with and without one
    // more character part there.
    api::Completion longer = reply;
    longer.content += "\x01";
    auto c = builder.Render(NextRequest(request, longer, "hearth warm-ahead placeholder one"));
    if (std::holds_alternative<BuildResult>(c)) {
      const auto& tc = std::get<BuildResult>(c).task.prompt;
      int32_t end = 0;
      while (static_cast<size_t>(end) < tc.size() && static_cast<size_t>(end) < ta.prompt.size() &&
             tc[static_cast<size_t>(end)] == ta.prompt[static_cast<size_t>(end)]) {
        ++end;
      }
      for (int32_t p = std::max<int32_t>(1, end - kCutOffSnapshots); p <= end; ++p) task.snapshot_positions.push_back(p);
      std::sort(task.snapshot_positions.begin(), task.snapshot_positions.end());
      task.snapshot_positions.erase(std::unique(task.snapshot_positions.begin(), task.snapshot_positions.end()),
                                    task.snapshot_positions.end());
    }
  }
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
  if (!task.request || task.background) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.size() >= kMaxPendingJobs) jobs_.pop_front();
    jobs_.emplace_back(task.request, reply);
  }
  cv_.notify_one();
}

void WarmAhead::Run() {
  while (true) {
    std::pair<std::shared_ptr<const api::GenerationRequest>, api::Completion> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (auto task = PlanWarmAhead(builder_, *job.first, job.second)) (void)engine_.Submit(std::move(*task));
  }
}

}  // namespace hearth::server
