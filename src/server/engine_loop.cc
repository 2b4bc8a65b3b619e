#include "server/engine_loop.h"

#include <algorithm>
#include <string>

namespace hearth::server {
namespace {

api::Delta ToApiDelta(const engine::ParsedDelta& d) {
  api::Delta out;
  out.content = d.content;
  out.reasoning = d.reasoning;
  if (d.tool_call_index >= 0) {
    out.tool_calls.push_back({d.tool_call_index, d.tool_call_id, d.tool_call_name, d.tool_call_arguments});
  }
  return out;
}

bool IsEmpty(const api::Delta& d) { return d.content.empty() && d.reasoning.empty() && d.tool_calls.empty(); }

}  // namespace

EngineLoop::EngineLoop(const engine::Model& model, EngineConfig config) : model_(model), config_(std::move(config)) {
  slots_.resize(static_cast<size_t>(config_.context.n_seq_max));
}

EngineLoop::~EngineLoop() { Stop(); }

Status EngineLoop::Start() {
  auto ctx = engine::Context::Create(model_, config_.context);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(*ctx);
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::shared_ptr<RequestStream>> EngineLoop::Submit(GenerationTask task) {
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    if (static_cast<int>(queue_.size()) >= config_.max_queued) {
      return ResourceExhausted("the server is busy: " + std::to_string(queue_.size()) +
                               " requests are already waiting; retry later");
    }
    queue_.push_back({std::move(task), stream});
    stats_.queued = static_cast<int>(queue_.size());
  }
  cv_.notify_one();
  return stream;
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// The loop: one batch per iteration.
void EngineLoop::Run() {
  while (WaitForWork()) {
    AdmitQueued();
    DropCancelled();
    BuildBatch();
    if (batch_.empty()) continue;
    Status s = ctx_->Decode(batch_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.decode_calls;
    }
    if (!s.ok()) {
      for (auto& slot : slots_) {
        if (slot && slot->in_batch) FailSlot(*slot, s);
      }
      continue;
    }
    CommitStep();
  }
}

bool EngineLoop::WaitForWork() {
  const bool busy = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; });
  std::deque<Queued> orphans;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!busy) cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (!stopping_) return true;
    orphans.swap(queue_);
  }
  const Status down = Unavailable("the server is shutting down");
  for (auto& q : orphans) q.stream->PushError(down);
  for (auto& slot : slots_) {
    if (slot) FailSlot(*slot, down);
  }
  return false;
}

void EngineLoop::AdmitQueued() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]) continue;
    std::optional<Queued> q = PopValidTask();
    if (!q) return;
    auto slot = std::make_unique<Slot>();
    slot->seq = static_cast<engine::SeqId>(i);
    slot->stream = std::move(q->stream);
    slot->sampler = std::make_unique<engine::Sampler>(model_, q->task.sampling);
    slot->sampler->Accept(q->task.prompt);
    const bool chat = q->task.output_format.has_value();
    slot->detokenizer = std::make_unique<engine::Detokenizer>(model_, /*render_special=*/chat);
    slot->stops = std::make_unique<engine::StopStrings>(q->task.stop);
    if (chat) slot->parser = std::make_unique<engine::OutputParser>(*q->task.output_format);
    slot->task = std::move(q->task);
    slot->t_admitted = std::chrono::steady_clock::now();
    ctx_->ClearSeq(slot->seq);
    slots_[i] = std::move(slot);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.slots_busy++;
  }
}

// The next queued task that fits the context; the others are answered with an error.
std::optional<EngineLoop::Queued> EngineLoop::PopValidTask() {
  while (true) {
    Queued q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return std::nullopt;
      q = std::move(queue_.front());
      queue_.pop_front();
      stats_.queued = static_cast<int>(queue_.size());
    }
    const int n_prompt = static_cast<int>(q.task.prompt.size());
    if (n_prompt > 0 && n_prompt < config_.context.n_ctx) return q;
    q.stream->PushError(OutOfRange("the prompt has " + std::to_string(n_prompt) +
                                   " tokens; it must be between 1 and " + std::to_string(config_.context.n_ctx - 1)));
  }
}

void EngineLoop::DropCancelled() {
  for (auto& slot : slots_) {
    if (slot && slot->stream->cancelled()) Finish(*slot, api::FinishReason::kCancelled);
  }
}

// One decode token for each generating slot, then prefill chunks in the budget left.
void EngineLoop::BuildBatch() {
  batch_.Clear();
  int budget = config_.context.n_batch;
  for (auto& slot : slots_) {
    if (!slot) continue;
    slot->in_batch = false;
    slot->logits_index.reset();
    if (!slot->pending) continue;
    slot->in_batch = true;
    slot->logits_index = batch_.Add(*slot->pending, ctx_->SeqLength(slot->seq), slot->seq, true);
    --budget;
  }
  for (auto& slot : slots_) {
    if (!slot || !slot->prefilling() || budget <= 0) continue;
    const auto& prompt = slot->task.prompt;
    const size_t n = std::min(prompt.size() - slot->n_prompt_done, static_cast<size_t>(budget));
    const engine::Pos pos0 = ctx_->SeqLength(slot->seq);
    for (size_t j = 0; j < n; ++j) {
      const bool last = slot->n_prompt_done + j + 1 == prompt.size();
      const int idx = batch_.Add(prompt[slot->n_prompt_done + j], pos0 + static_cast<engine::Pos>(j), slot->seq, last);
      if (last) slot->logits_index = idx;
    }
    slot->in_batch = n > 0;
    slot->n_prompt_done += n;
    budget -= static_cast<int>(n);
  }
}

void EngineLoop::CommitStep() {
  for (auto& slot : slots_) {
    if (!slot || !slot->logits_index) continue;
    slot->pending.reset();
    if (slot->generated.empty()) {
      slot->t_first_token = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      stats_.prompt_tokens += static_cast<int64_t>(slot->task.prompt.size());
      stats_.prompt_tokens_cached += slot->n_cached;
      stats_.prompt_tokens_prefilled += static_cast<int64_t>(slot->task.prompt.size()) - slot->n_cached;
    }
    const engine::Token token = slot->sampler->Sample(*ctx_, *slot->logits_index);
    EmitToken(*slot, token);
  }
}

void EngineLoop::EmitToken(Slot& slot, engine::Token token) {
  if (model_.IsEndOfGeneration(token)) {
    Finish(slot, api::FinishReason::kStop);
    return;
  }
  slot.generated.push_back(token);
  auto r = slot.stops->Feed(slot.detokenizer->Push(token));
  if (slot.parser) {
    for (const auto& d : slot.parser->Push(r.text, false)) {
      api::Delta delta = ToApiDelta(d);
      if (!IsEmpty(delta)) slot.stream->PushDelta(std::move(delta));
    }
  } else if (!r.text.empty()) {
    slot.completion.content += r.text;
    slot.stream->PushDelta({.content = r.text});
  }
  if (r.stopped) {
    Finish(slot, api::FinishReason::kStopSequence, r.matched);
  } else if (static_cast<int>(slot.generated.size()) >= slot.task.max_tokens ||
             ctx_->SeqLength(slot.seq) + 1 >= config_.context.n_ctx) {
    Finish(slot, api::FinishReason::kLength);
  } else {
    slot.pending = token;
  }
}

void EngineLoop::Finish(Slot& slot, api::FinishReason reason, std::string stop_sequence) {
  // Whatever the detokenizer and stop matcher still hold is output too, unless a stop
  // string ended the text.
  std::string tail;
  if (reason != api::FinishReason::kStopSequence) {
    auto r = slot.stops->Feed(slot.detokenizer->Flush());
    tail = r.text + (r.stopped ? "" : slot.stops->Flush());
  }
  api::Completion c;
  if (slot.parser) {
    for (const auto& d : slot.parser->Push(tail, true)) {
      api::Delta delta = ToApiDelta(d);
      if (!IsEmpty(delta)) slot.stream->PushDelta(std::move(delta));
    }
    const auto& out = slot.parser->output();
    c.content = out.content;
    c.reasoning = out.reasoning;
    for (const auto& call : out.tool_calls) c.tool_calls.push_back({call.id, call.name, call.arguments});
  } else {
    if (!tail.empty()) slot.stream->PushDelta({.content = tail});
    c.content = slot.completion.content + tail;
  }
  c.finish_reason = reason;
  if (reason == api::FinishReason::kStop && !c.tool_calls.empty()) c.finish_reason = api::FinishReason::kToolCalls;
  c.stop_sequence = std::move(stop_sequence);
  c.usage.prompt_tokens = static_cast<int>(slot.task.prompt.size());
  c.usage.completion_tokens = static_cast<int>(slot.generated.size());
  c.usage.cached_tokens = slot.n_cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests_finished++;
    if (reason == api::FinishReason::kCancelled) stats_.requests_cancelled++;
    stats_.generated_tokens += static_cast<int64_t>(slot.generated.size());
  }
  slot.stream->PushDone(std::move(c));
  Release(slot);
}

void EngineLoop::FailSlot(Slot& slot, const Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests_failed++;
  }
  slot.stream->PushError(error);
  Release(slot);
}

void EngineLoop::Release(Slot& slot) {
  const engine::SeqId seq = slot.seq;
  ctx_->ClearSeq(seq);
  slots_[static_cast<size_t>(seq)].reset();  // destroys `slot`
  std::lock_guard<std::mutex> lock(mu_);
  stats_.slots_busy--;
}

}  // namespace hearth::server
