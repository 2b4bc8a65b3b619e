#include "server/engine_loop.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/utf8.h"
#include "cache/volatile_span.h"
#include "server/context_sequence_store.h"
#include "server/metrics.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

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

constexpr size_t kMaxBackgroundQueued = 4;
// Write-behind to the disk tier waits this long after the last decode: a client that
// answers at once (an agent after a tool call) should not wait behind a state copy.
constexpr auto kWriteBehindDelay = std::chrono::milliseconds(1000);
constexpr int kBackgroundChunk = 32;  // tokens per step for warm-ahead prefill

}  // namespace

std::string DiskTierDir(const std::string& cache_dir, const std::string& cache_namespace, const std::string& layout) {
  const std::string key = cache_namespace + "|" + layout;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  return cache_dir + "/states-" + hex;
}

EngineLoop::EngineLoop(const engine::Model& model, EngineConfig config) : model_(model), config_(std::move(config)) {
  slots_.resize(static_cast<size_t>(config_.n_parallel));
}

EngineLoop::~EngineLoop() { Stop(); }

Status EngineLoop::Open() {
  if (ctx_ != nullptr) return Internal("the engine is already open");
  if (config_.n_parallel < 1 || config_.n_parallel > config_.context.n_seq_max) {
    return InvalidArgument("n_parallel must be in [1, n_seq_max]");
  }
  auto ctx = engine::Context::Create(model_, config_.context);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(*ctx);
  sequences_ = std::make_unique<ContextSequenceStore>(*ctx_);
  if (!config_.cache_dir.empty()) {
    cache::DiskStore::Options options;
    options.file_system = config_.cache_file_system;
    auto disk = cache::DiskStore::Open(DiskTierDir(config_.cache_dir, config_.cache_namespace, ctx_->StateLayout()),
                                       config_.cache_disk_bytes, config_.cache_namespace, options);
    if (disk.ok()) {
      disk_ = std::move(*disk);
    } else {
      // A cache is an optimization: serve without the tier rather than not at all.
      disk_unavailable_ = disk.status().message();
      std::fprintf(stderr, "hearth: disk tier OFF: %s; serving with the device and RAM tiers only\n",
                   disk_unavailable_.c_str());
    }
  }
  cache::CacheConfig cc;
  for (engine::LayerKind k : model_.info().layers) cc.needs_partial |= (k != engine::LayerKind::kAttention);
  for (int i = 0; i < config_.context.n_seq_max; ++i) cc.sequences.push_back(i);
  cc.ram_budget_bytes = config_.cache_ram_bytes;
  cc.pin_budget_bytes = config_.cache_pin_bytes;
  cache_ = std::make_unique<cache::PrefixCache>(cc, *sequences_, disk_.get());
  cache_summary_ = std::make_shared<const cache::CacheSummary>(Summarize());
  return Status::Ok();
}

Status EngineLoop::Start() {
  if (ctx_ == nullptr) HEARTH_RETURN_IF_ERROR(Open());
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  // The loop is gone; this thread owns the cache now. What the disk tier lacks goes
  // there, so a start on the same --cache-dir resumes every conversation.
  if (config_.prefix_cache && disk_) {
    const int n = cache_->WriteBehind([] { return false; });
    disk_->Flush();
    if (n > 0) std::fprintf(stderr, "hearth: wrote %d cached states to %s\n", n, config_.cache_dir.c_str());
  }
}

StatusOr<std::shared_ptr<RequestStream>> EngineLoop::Submit(GenerationTask task) {
  auto stream = std::make_shared<RequestStream>();
  if (task.received == Clock::time_point{}) task.received = Clock::now();
  task.submitted = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    if (task.background) {
      if (background_queue_.size() >= kMaxBackgroundQueued) {
        background_queue_.front().stream->PushDone({});  // dropped unrun: the oldest is the stalest
        background_queue_.pop_front();
      }
      background_queue_.push_back({std::move(task), stream});
    } else {
      if (static_cast<int>(queue_.size()) >= config_.max_queued) {
        return ResourceExhausted("the server is busy: " + std::to_string(queue_.size()) +
                                 " requests are already waiting; retry later");
      }
      queue_.push_back({std::move(task), stream});
      stats_.queued = static_cast<int>(queue_.size());
    }
  }
  cv_.notify_one();
  return stream;
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// The loop: one batch per iteration. An exception from a step (a library's, or memory
// running out) fails what is in flight, never the process: the loop keeps serving.
void EngineLoop::Run() {
  while (WaitForWork()) {
    try {
      Step();
    } catch (const std::exception& e) {
      FailInFlight(Internal(std::string("the engine failed a step: ") + e.what()));
    } catch (...) {
      FailInFlight(Internal("the engine failed a step"));
    }
  }
}

void EngineLoop::Step() {
  // Cancelled requests end before admission (a client that cut a reply off and sent
  // the next request at once resumes from what the cut one computed, which it holds
  // until it ends), and again after (one cancelled while it waited computes nothing).
  DropCancelled();
  AdmitQueued();
  DropCancelled();
  BuildBatch();
  if (batch_.empty()) {
    // Idle: the next request should find a sequence free rather than wait while an
    // idle one moves to RAM; with a disk tier, what a restart would lose is written
    // behind (one state at a time, stopping for a request that comes).
    if (config_.prefix_cache && !ForegroundQueued()) {
      cache_->SpareASequence();
      if (Clock::now() - last_busy_ >= kWriteBehindDelay) cache_->WriteBehind([this] { return ForegroundQueued(); });
    }
    return;
  }
  last_busy_ = Clock::now();
  Status s = DecodeMakingRoom();
  if (batch_.empty()) return;
  if (!s.ok()) {
    for (auto& slot : slots_) {
      if (slot && slot->shadow && slot->shadow->n_in_batch > 0) EndShadow(*slot, nullptr, "decode failed");
      if (slot && slot->in_batch) FailSlot(*slot, s);
    }
    return;
  }
  CommitStep();
}

// Ends every request in a slot with `error`; their sequences go back empty. Paused
// requests (their states in the cache, not in the failed step) stay paused.
void EngineLoop::FailInFlight(const Status& error) {
  batch_.Clear();
  for (auto& slot : slots_) {
    if (slot) FailSlot(*slot, error);
  }
}

// Decodes the batch; when the KV cells run out, frees idle cached sequences, then
// requeues prefilling requests (their progress kept in the cache, to resume when room
// returns), retrying after each step. Only a batch of decode tokens alone can still fail.
Status EngineLoop::DecodeMakingRoom() {
  Status s = ctx_->Decode(batch_);
  while (s.code() == StatusCode::kResourceExhausted) {
    // The failed decode left the memory as it was: prefill progress is what the
    // sequences hold.
    for (auto& slot : slots_) {
      if (slot && slot->in_batch && !slot->pending) slot->n_prompt_done = static_cast<size_t>(ctx_->SeqLength(slot->seq));
    }
    if (!DropOneShadow() && !cache_->EvictIdleDevice() && !RequeueYoungestPrefill() && !PauseYoungestGenerating()) {
      break;
    }
    BuildBatch();
    if (batch_.empty()) return Status::Ok();
    s = ctx_->Decode(batch_);
  }
  return s;
}

// Puts the most recently admitted prefilling request back at the front of the queue,
// its sequence (with what it prefilled) given to the cache. False when none prefills.
bool EngineLoop::RequeueYoungestPrefill() {
  Slot* youngest = nullptr;
  for (auto& slot : slots_) {
    if (slot && slot->prefilling() && !slot->task.background &&
        (!youngest || slot->t_admitted > youngest->t_admitted)) {
      youngest = slot.get();
    }
  }
  if (youngest == nullptr) return false;
  EndShadow(*youngest, nullptr, "request requeued");
  Queued q{std::move(youngest->task), youngest->stream, youngest->resume};
  q.first_resume->n_reused = youngest->n_cached;
  const engine::SeqId seq = youngest->seq;
  const auto done = static_cast<size_t>(ctx_->SeqLength(seq));
  cache_->Adopt(q.task.cache_namespace, seq, std::span(q.task.prompt).subspan(0, done));
  for (auto& s : slots_) {
    if (s.get() == youngest) s.reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_front(std::move(q));
  stats_.slots_busy--;
  stats_.requests_requeued++;
  wait_for_room_ = true;
  stats_.queued = static_cast<int>(queue_.size());
  return true;
}

// Last resort when generating requests together outgrow the KV cells: the youngest one
// pauses. Its sequence goes to the cache (and from there to RAM when cells are needed);
// it resumes where it stopped once the requests running before it are done.
bool EngineLoop::PauseYoungestGenerating() {
  Slot* youngest = nullptr;
  int n_generating = 0;
  for (auto& slot : slots_) {
    if (!slot || !slot->pending) continue;
    ++n_generating;
    if (!youngest || slot->t_admitted > youngest->t_admitted) youngest = slot.get();
  }
  if (youngest == nullptr || n_generating < 2) return false;
  EndShadow(*youngest, nullptr, "its request paused");
  std::vector<engine::Token> decoded = youngest->task.prompt;
  decoded.insert(decoded.end(), youngest->generated.begin(), youngest->generated.end());
  decoded.resize(static_cast<size_t>(ctx_->SeqLength(youngest->seq)));  // the pending token is not in yet
  cache_->Adopt(youngest->task.cache_namespace, youngest->seq, decoded);
  youngest->seq = -1;  // the cache's now
  youngest->in_batch = false;
  youngest->logits_index.reset();
  for (auto& s : slots_) {
    if (s.get() == youngest) paused_.push_back(std::move(s));
  }
  std::fprintf(stderr, "hearth: paused a request at %zu tokens: the requests running together outgrew the KV cache "
               "(--ctx-size %d); it resumes when the older ones are done\n", decoded.size(), config_.context.n_ctx);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.requests_paused++;
  return true;
}

// Resumes the oldest paused request once nothing else runs. A paused request whose
// states left the cache meanwhile ends with the error it used to get at once.
void EngineLoop::ResumePaused() {
  if (paused_.empty()) return;
  for (const auto& s : slots_) {
    if (s && !s->task.background) return;
  }
  PreemptBackground(/*force=*/true);
  auto free_slot = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return s == nullptr; });
  if (free_slot == slots_.end()) return;
  std::unique_ptr<Slot> slot = std::move(paused_.front());
  std::vector<engine::Token> decoded = slot->task.prompt;
  decoded.insert(decoded.end(), slot->generated.begin(), slot->generated.end() - (slot->pending ? 1 : 0));
  const auto n = static_cast<int32_t>(decoded.size());
  constexpr auto kInternal = cache::PrefixCache::Lookup::kInternal;
  // Restoring it may need the KV cells that idle cached sequences hold: Acquire frees
  // them (nothing else runs now).
  auto lease = cache_->Acquire(slot->task.cache_namespace, decoded, n, kInternal);
  if (!lease) {
    paused_.front() = std::move(slot);
    return;
  }
  paused_.pop_front();
  slot->seq = lease->seq;
  *free_slot = std::move(slot);
  if (lease->report.n_reused != n) {
    FailSlot(**free_slot, ResourceExhausted("the requests running together outgrew the KV cache (--ctx-size " +
                                             std::to_string(config_.context.n_ctx) +
                                             ") and this one's paused state was evicted; retry it"));
  }
}

bool EngineLoop::WaitForWork() {
  const bool busy = !paused_.empty() ||
                    std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; });
  std::deque<Queued> orphans;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stats_.decode_calls += batch_.empty() ? 0 : 1;
    stats_.cache = cache_->stats();
    // The tree's summary walks every node: while busy, a few times a second is enough.
    const auto now = Clock::now();
    if (!busy || now - summary_refreshed_ > std::chrono::milliseconds(250)) {
      cache_summary_ = std::make_shared<const cache::CacheSummary>(Summarize());
      summary_refreshed_ = now;
    }
    auto has_work = [this] { return stopping_ || !queue_.empty() || !background_queue_.empty(); };
    // Idle with states to write behind: wake up when the engine has been idle long enough.
    if (!busy && config_.prefix_cache && cache_->HasUnwritten()) {
      cv_.wait_until(lock, last_busy_ + kWriteBehindDelay, has_work);
    } else if (!busy) {
      cv_.wait(lock, has_work);
    }
    if (!stopping_) return true;
    orphans.swap(queue_);
    for (auto& q : background_queue_) orphans.push_back(std::move(q));
    background_queue_.clear();
  }
  const Status down = Unavailable("the server is shutting down");
  for (auto& q : orphans) q.stream->PushError(down);
  for (auto& p : paused_) p->stream->PushError(down);
  paused_.clear();
  for (auto& slot : slots_) {
    if (slot) FailSlot(*slot, down);
  }
  return false;
}

bool EngineLoop::HasForegroundWork() {
  for (const auto& s : slots_) {
    if (s && !s->task.background) return true;
  }
  return ForegroundQueued();
}

// A request waiting takes precedence over warm-ahead: background slots end (keeping what
// they prefilled) before it is admitted, so it resumes from their work.
void EngineLoop::PreemptBackground(bool force) {
  if (!force) {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return;
  }
  for (auto& slot : slots_) {
    if (slot && slot->task.background) Finish(*slot, api::FinishReason::kCancelled);
  }
}

bool EngineLoop::EndOneBackground() {
  for (auto& slot : slots_) {
    if (slot && slot->task.background) {
      Finish(*slot, api::FinishReason::kCancelled);
      return true;
    }
  }
  return false;
}

void EngineLoop::AdmitQueued() {
  ResumePaused();
  if (!paused_.empty()) return;  // a paused request goes first when room returns
  // A prefill put back for room waits until a request ends and frees cells: admitted at
  // once, it would find the same cells taken and go back again, step after step.
  if (wait_for_room_ && std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; })) return;
  wait_for_room_ = false;
  PreemptBackground();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]) continue;
    std::optional<Queued> q = PopValidTask(/*background=*/false);
    if (!q && !HasForegroundWork()) q = PopValidTask(/*background=*/true);
    if (!q) return;
    if (!Admit(std::move(*q), i)) return;
  }
}

// Lends a sequence from the cache, resumes the prompt, and sets the slot up. False when
// no sequence is free (the task goes back to the front of its queue).
bool EngineLoop::Admit(Queued q, size_t slot_index) {
  const auto& prompt = q.task.prompt;
  int32_t max_reuse = config_.prefix_cache ? static_cast<int32_t>(prompt.size()) - 1 : 0;
  if (q.task.max_resume >= 0) max_reuse = std::min(max_reuse, q.task.max_resume);
  constexpr auto kInternal = cache::PrefixCache::Lookup::kInternal;
  auto lease = cache_->Acquire(q.task.cache_namespace, prompt, max_reuse, kInternal);
  // Shadows are the first to give their sequence up.
  while (!lease && !q.task.background && DropOneShadow()) {
    lease = cache_->Acquire(q.task.cache_namespace, prompt, max_reuse, kInternal);
  }
  // A restore that found no free KV cells (idle cached sequences gave theirs already)
  // gets them from shadows, then from background work (which keeps what it prefilled).
  while (lease && lease->report.no_room && !q.task.background && (DropOneShadow() || EndOneBackground())) {
    cache_->Release(lease->seq);
    lease = cache_->Acquire(q.task.cache_namespace, prompt, max_reuse, kInternal);
  }
  if (lease) cache_->CountRequestLookup(lease->report);
  if (!lease) {
    std::lock_guard<std::mutex> lock(mu_);
    (q.task.background ? background_queue_ : queue_).push_front(std::move(q));
    return false;
  }
  auto slot = std::make_unique<Slot>();
  slot->seq = lease->seq;
  slot->resume = lease->report;
  slot->n_prompt_done = static_cast<size_t>(lease->report.n_reused);
  slot->n_cached = lease->report.n_reused;
  if (q.first_resume) {  // what it prefilled itself before it was put back is not reuse
    slot->resume = *q.first_resume;
    slot->n_cached = std::min(slot->n_cached, q.first_resume->n_reused);
    slot->resume.n_reused = slot->n_cached;
  }
  slot->stream = std::move(q.stream);
  const bool chat = q.task.output_format.has_value();
  if (!q.task.background) {
    slot->sampler = std::make_unique<engine::Sampler>(model_, q.task.sampling);
    slot->sampler->Accept(prompt);
    slot->detokenizer = std::make_unique<engine::Detokenizer>(model_, /*render_special=*/chat);
    slot->stops = std::make_unique<engine::StopStrings>(q.task.stop);
    if (chat) slot->parser = std::make_unique<engine::OutputParser>(*q.task.output_format);
  }
  slot->task = std::move(q.task);
  if (!slot->task.background) {
    ExplainDivergence(*slot);
    DropWarmAheadCoveredBy(slot->task);
    // What the prompt reuses is known now, before the prefill: a stream reports it at
    // its start (Anthropic's message_start), as the end of the request will.
    slot->stream->PushAdmitted(UsageSoFar(*slot));
  }
  while (slot->next_snapshot < slot->task.snapshot_positions.size() &&
         slot->task.snapshot_positions[slot->next_snapshot] <= static_cast<int32_t>(slot->n_prompt_done)) {
    ++slot->next_snapshot;
  }
  slot->t_admitted = Clock::now();
  slot->shadow_due = static_cast<int32_t>(slot->n_prompt_done) == ShadowFork(slot->task) && config_.prefix_cache;
  slots_[slot_index] = std::move(slot);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.slots_busy++;
  return true;
}

// Warm-ahead work for a request that has come is stale: the request computes or reuses
// that prefix itself. A task is covered when the request's prompt begins with its prompt,
// or, for a cut-off reply's task, with its prompt up to where the reply's uncertain end
// begins (max_resume: the client may have read less than was written).
void EngineLoop::DropWarmAheadCoveredBy(const GenerationTask& task) {
  auto covered = [&](const GenerationTask& bg) {
    const size_t need = bg.max_resume >= 0 ? std::min(bg.prompt.size(), static_cast<size_t>(bg.max_resume))
                                           : bg.prompt.size();
    return bg.cache_namespace == task.cache_namespace && need > 0 && need <= task.prompt.size() &&
           std::equal(bg.prompt.begin(), bg.prompt.begin() + static_cast<std::ptrdiff_t>(need), task.prompt.begin());
  };
  for (auto& slot : slots_) {
    if (slot && slot->task.background && covered(slot->task)) Finish(*slot, api::FinishReason::kCancelled);
  }
  std::lock_guard<std::mutex> lock(mu_);
  CountSkippedBackground(static_cast<int64_t>(std::erase_if(background_queue_, [&](const Queued& q) {
    if (!covered(q.task)) return false;
    q.stream->PushDone({});
    return true;
  })));
}

// When the prompt leaves the cache and rejoins an earlier prompt right after, the span
// in between is per-request content defeating reuse: report it.
void EngineLoop::ExplainDivergence(Slot& slot) {
  const auto& prompt = slot.task.prompt;
  const int32_t diverged = slot.resume.n_matched;
  if (diverged <= 0 || diverged + 1 >= static_cast<int32_t>(prompt.size())) return;
  auto earlier = cache_->EarlierContinuation(slot.task.cache_namespace, prompt);
  auto span = cache::FindVolatileSpan(prompt, earlier, diverged);
  if (!span || span->end_new == span->start || span->end_earlier == span->start) return;
  // Spans holding template structure (a dropped <think> scaffold) are the template trap,
  // which warm-ahead handles, not per-request content.
  auto structural = [&](const std::vector<engine::Token>& t, int32_t a, int32_t b) {
    for (int32_t i = a; i < b; ++i) {
      if (model_.IsControl(t[static_cast<size_t>(i)])) return true;
    }
    return false;
  };
  if (structural(prompt, span->start, span->end_new) || structural(earlier, span->start, span->end_earlier)) return;
  api::CacheReport& r = slot.report;
  r.volatile_span = true;
  const auto& marks = slot.task.snapshot_positions;
  r.volatile_message = static_cast<int>(std::count_if(marks.begin(), marks.end(), [&](int32_t p) { return p <= span->start; }));
  auto text = [&](const std::vector<engine::Token>& t, int32_t a, int32_t b) {
    return SanitizeUtf8(model_.Detokenize(std::span(t).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)), true));
  };
  r.volatile_start = span->start;
  r.volatile_end = span->end_new;
  r.volatile_text = text(prompt, span->start, span->end_new);
  // The earlier prompt may be another client's: its text goes to the operator's log, and
  // only with --verbose, never into the response.
  const std::string was = config_.verbose ? " (was \"" + text(earlier, span->start, span->end_earlier) + "\")" : "";
  std::fprintf(stderr,
               "hearth: volatile span in message %d at tokens [%d, %d): \"%s\"%s; the prompt rejoins the cache "
               "right after it: move it to the end of the conversation or start with --stabilize\n",
               r.volatile_message, span->start, span->end_new, r.volatile_text.c_str(), was.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  stats_.volatile_spans++;
}

// The next queued task that fits the context; the others are answered with an error.
std::optional<EngineLoop::Queued> EngineLoop::PopValidTask(bool background) {
  while (true) {
    Queued q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& queue = background ? background_queue_ : queue_;
      if (queue.empty()) return std::nullopt;
      q = std::move(queue.front());
      queue.pop_front();
      stats_.queued = static_cast<int>(queue_.size());
    }
    const int n_prompt = static_cast<int>(q.task.prompt.size());
    // Background work the cache already holds (a shadow continued the reply in place)
    // has nothing left to compute.
    if (background && config_.prefix_cache && cache_->Holds(q.task.cache_namespace, q.task.prompt)) {
      q.stream->PushDone({});
      std::lock_guard<std::mutex> lock(mu_);
      CountSkippedBackground(1);
      continue;
    }
    if (n_prompt > 0 && n_prompt < config_.SeqPositions()) return q;
    q.stream->PushError(OutOfRange("the prompt has " + std::to_string(n_prompt) + " tokens; it must be between 1 and " +
                                   std::to_string(config_.SeqPositions() - 1)));
  }
}

size_t EngineLoop::QueuedSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t longest = 0;
  for (const auto& q : queue_) {
    if (q.task.cache_namespace == ns) longest = std::max(longest, engine::CommonPrefix(q.task.prompt, tokens));
  }
  return longest;
}

bool EngineLoop::ForegroundPrefilling() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s && s->prefilling() && !s->task.background; });
}

bool EngineLoop::ForegroundQueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !queue_.empty();
}

void EngineLoop::DropCancelled() {
  const bool foreground_waiting = ForegroundQueued();
  for (auto& slot : slots_) {
    if (!slot) continue;
    if (slot->stream->cancelled() || (slot->task.background && foreground_waiting)) {
      Finish(*slot, api::FinishReason::kCancelled);
    }
  }
  // A paused request whose client gave up ends now, not when room returns.
  for (auto it = paused_.begin(); it != paused_.end();) {
    if (!(*it)->stream->cancelled()) {
      ++it;
      continue;
    }
    std::unique_ptr<Slot> slot = std::move(*it);
    it = paused_.erase(it);
    Finish(*slot, api::FinishReason::kCancelled);
  }
}

// One decode token for each generating slot, then prefill chunks in the budget left.
// A prefill chunk ends at the next snapshot position, so the state there can be saved.
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
  // Background work waits while a request prefills: it would lengthen that request's
  // decodes and put its snapshots before that request's first token.
  const bool foreground_prefilling = ForegroundPrefilling();
  for (auto& slot : slots_) {
    if (!slot || !slot->prefilling() || budget <= 0) continue;
    if (slot->task.background && foreground_prefilling) continue;
    const auto& prompt = slot->task.prompt;
    // Background chunks stay small: a request arriving meanwhile waits at most for one.
    const int room = slot->task.background ? std::min(budget, kBackgroundChunk) : budget;
    size_t end = std::min(prompt.size(), slot->n_prompt_done + static_cast<size_t>(room));
    const auto& snaps = slot->task.snapshot_positions;
    if (slot->next_snapshot < snaps.size()) end = std::min(end, static_cast<size_t>(snaps[slot->next_snapshot]));
    const engine::Pos pos0 = ctx_->SeqLength(slot->seq);
    const bool sample_after = !slot->task.background;
    for (size_t j = slot->n_prompt_done; j < end; ++j) {
      const bool last = j + 1 == prompt.size() && sample_after;
      const int idx = batch_.Add(prompt[j], pos0 + static_cast<engine::Pos>(j - slot->n_prompt_done), slot->seq, last);
      if (last) slot->logits_index = idx;
    }
    slot->in_batch = end > slot->n_prompt_done;
    budget -= static_cast<int>(end - slot->n_prompt_done);
    slot->n_prompt_done = end;
  }
  for (auto& slot : slots_) {
    if (slot && slot->shadow) AddShadowTokens(*slot, budget);
  }
}

// Keeps states at the snapshot positions the prompt has reached. A request's state at
// its prompt's end and its shadow's start wait until its first token is out (nothing
// needs them before; each costs a state copy, a shadow's maybe moving an idle sequence to
// RAM first): pass `first_token_out` then.
void EngineLoop::TakeSnapshots(Slot& slot, bool first_token_out) {
  const auto& snaps = slot.task.snapshot_positions;
  while (slot.next_snapshot < snaps.size() && snaps[slot.next_snapshot] <= static_cast<int32_t>(slot.n_prompt_done)) {
    const auto at = static_cast<size_t>(snaps[slot.next_snapshot]);
    if (at == slot.n_prompt_done && config_.prefix_cache) {
      if (!slot.task.background && at == slot.task.prompt.size() && !first_token_out) return;
      cache_->SnapshotPartial(slot.task.cache_namespace, slot.seq, std::span(slot.task.prompt).subspan(0, at));
      if (static_cast<int32_t>(at) == ShadowFork(slot.task)) slot.shadow_due = true;
    }
    ++slot.next_snapshot;
  }
  if (first_token_out && slot.shadow_due) {
    slot.shadow_due = false;
    StartShadow(slot);
  }
}

void EngineLoop::CommitStep() {
  int64_t shadow_fed = 0;
  for (auto& slot : slots_) {
    if (!slot || !slot->shadow || slot->shadow->n_in_batch == 0) continue;
    Slot::Shadow& sh = *slot->shadow;
    const auto from = sh.target.tokens.begin() + sh.fork + static_cast<std::ptrdiff_t>(sh.fed.size());
    sh.fed.insert(sh.fed.end(), from, from + static_cast<std::ptrdiff_t>(sh.n_in_batch));
    sh.unfed -= static_cast<int>(sh.n_in_batch);
    sh.fed_content = sh.target.basis_content;
    sh.fed_reasoning = sh.target.basis_reasoning;
    shadow_fed += static_cast<int64_t>(sh.n_in_batch);
    sh.n_in_batch = 0;
    KeepShadowStateAtMessageEnd(*slot);
  }
  if (shadow_fed > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.shadow_tokens += shadow_fed;
  }
  // Sample every slot before emitting any token: emitting may finish a request, and a
  // finishing shadow decodes its last tokens (DrainShadow), which replaces the logits.
  std::vector<std::pair<Slot*, engine::Token>> sampled;
  std::vector<size_t> first_tokens;  // indices into slots_
  for (size_t i = 0; i < slots_.size(); ++i) {
    auto& slot = slots_[i];
    if (!slot || !slot->in_batch) continue;
    if (!slot->pending) TakeSnapshots(*slot, /*first_token_out=*/false);
    if (slot->task.background) {
      if (!slot->prefilling()) Finish(*slot, api::FinishReason::kStop);
      continue;
    }
    if (!slot->logits_index) continue;
    slot->pending.reset();
    if (slot->generated.empty()) {
      first_tokens.push_back(i);
      slot->t_prefilled = slot->t_first_token = Clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      stats_.prompt_tokens += static_cast<int64_t>(slot->task.prompt.size());
      stats_.prompt_tokens_cached += slot->n_cached;
      stats_.prompt_tokens_prefilled += static_cast<int64_t>(slot->task.prompt.size()) - slot->n_cached;
    }
    sampled.emplace_back(slot.get(), slot->sampler->Sample(*ctx_, *slot->logits_index));
  }
  for (auto [slot, token] : sampled) EmitToken(*slot, token);
  // The first tokens are out: what waited for them (the new token is not decoded yet, so
  // the sequence still holds exactly the prompt). A request that already finished left
  // its sequence, holding the prompt, to the cache (its place in slots_ is empty).
  for (size_t i : first_tokens) {
    if (slots_[i]) TakeSnapshots(*slots_[i], /*first_token_out=*/true);
  }
  // A state copy on the way to a first token (the generation start's) goes into touched
  // memory; the buffer is made while no request waits for its first token.
  if (config_.prefix_cache && !ForegroundQueued() && !ForegroundPrefilling()) ctx_->PrepareSpareState();
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
    if (slot.shadow) PostShadowProgress(slot);
  } else if (!r.text.empty()) {
    slot.completion.content += r.text;
    slot.stream->PushDelta({.content = r.text});
  }
  if (r.stopped) {
    Finish(slot, api::FinishReason::kStopSequence, r.matched);
  } else if (static_cast<int>(slot.generated.size()) >= slot.task.max_tokens ||
             ctx_->SeqLength(slot.seq) + 1 >= config_.SeqPositions()) {
    Finish(slot, api::FinishReason::kLength);
  } else {
    slot.pending = token;
  }
}

// A skipped warm-ahead task counts as a task too. Holds mu_.
void EngineLoop::CountSkippedBackground(int64_t n) {
  stats_.background_tasks += n;
  stats_.background_skipped += n;
}

void EngineLoop::Finish(Slot& slot, api::FinishReason reason, std::string stop_sequence) {
  if (slot.task.background) {
    slot.stream->PushDone({});
    std::lock_guard<std::mutex> lock(mu_);
    stats_.background_tasks++;
    stats_.background_tokens += static_cast<int64_t>(slot.n_prompt_done) - slot.n_cached;
  } else {
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
    c.usage = UsageSoFar(slot);
    c.usage.cache->prefilled_tokens = static_cast<int>(slot.n_prompt_done) - slot.n_cached;
    c.timings = TimingsOf(slot, Clock::now());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.requests_finished++;
      if (reason == api::FinishReason::kCancelled) stats_.requests_cancelled++;
      stats_.generated_tokens += static_cast<int64_t>(slot.generated.size());
    }
    LogRequest(slot, reason == api::FinishReason::kCancelled ? "cancelled" : "done");
    RecordRequest(slot, reason == api::FinishReason::kCancelled ? "cancelled" : "done");
    // A cut-off client sends back what it received, not what was generated after.
    auto delivered = reason == api::FinishReason::kCancelled ? slot.stream->delivered() : std::nullopt;
    if (delivered) {  // its own usage and timings, for the finished callback
      delivered->usage = c.usage;
      delivered->timings = c.timings;
    }
    // A cut-off reply: the shadow is kept when what was delivered begins with what it was
    // fed from, and goes on through the end of what was delivered when its target can be
    // continued there (a client answering at once sends exactly that back); it is never
    // fed past it. Warm-ahead still snapshots the reply's last positions (max_resume) for
    // a client that read less.
    if (reason == api::FinishReason::kCancelled) {
      const api::Completion sent = delivered ? *delivered : api::Completion{};
      EndShadow(slot, &sent, "reply cut off", /*cut_off=*/true);
    } else {
      EndShadow(slot, &c);
    }
    if (on_finished_) on_finished_(slot.task, delivered ? *delivered : c);
    // What this request wrote is known once its sequence is in the cache.
    const std::shared_ptr<RequestStream> stream = slot.stream;
    const std::string ns = slot.task.cache_namespace;
    const std::vector<engine::Token> prompt = slot.task.prompt;
    const int n_cached = slot.n_cached;
    Release(slot, /*keep_in_cache=*/true);  // destroys `slot`
    c.usage.cache_written_tokens = CacheWritten(ns, prompt, n_cached);
    if (c.usage.cache) c.usage.cache->written_tokens = c.usage.cache_written_tokens;
    stream->PushDone(std::move(c));
    return;
  }
  Release(slot, /*keep_in_cache=*/true);
}

// Prompt tokens past the reused ones that the cache can now resume through: up to the
// deepest position of the prompt where a later request could resume.
int EngineLoop::CacheWritten(const std::string& ns, const std::vector<engine::Token>& prompt, int n_cached) {
  if (!config_.prefix_cache) return 0;
  return std::max(0, cache_->ResumableDepth(ns, prompt) - n_cached);
}

// Holds the state the conversation's next turn resumes from (the request's own, or its
// kept shadow's), and the states at the client's cache breakpoints.
void EngineLoop::HoldNewest(Slot& slot, std::span<const engine::Token> tokens) {
  if (!config_.prefix_cache || slot.newest_held) return;
  const GenerationTask& t = slot.task;
  const int seconds = t.newest_hold_seconds > 0 ? t.newest_hold_seconds : config_.cache_pin_minutes * 60;
  slot.newest_held = true;
  if (seconds > 0) {
    cache_->Hold(t.cache_namespace, tokens,
                 {.duration = std::chrono::seconds(seconds), .newest = true, .conversation = t.cache_conversation});
  }
  for (const auto& bp : t.cache_breakpoints) {
    if (bp.position > static_cast<int32_t>(t.prompt.size())) continue;
    cache_->Hold(t.cache_namespace, std::span(t.prompt).subspan(0, static_cast<size_t>(bp.position)),
                 {.duration = std::chrono::seconds(bp.ttl_seconds)});
  }
}

// The slot's usage and cache report; at admission prefilled_tokens is what is left to
// prefill, at the end what was.
api::Usage EngineLoop::UsageSoFar(const Slot& slot) const {
  api::Usage u;
  u.prompt_tokens = static_cast<int>(slot.task.prompt.size());
  u.completion_tokens = static_cast<int>(slot.generated.size());
  u.cached_tokens = slot.n_cached;
  // What the request will have written once it ends: its sequence goes to the cache with
  // the whole prompt (Finish replaces this with what the cache then holds).
  if (config_.prefix_cache) u.cache_written_tokens = u.prompt_tokens - slot.n_cached;
  api::CacheReport report = slot.report;
  report.reused_tokens = slot.n_cached;
  report.prefilled_tokens = u.prompt_tokens - slot.n_cached;
  if (slot.n_cached > 0) report.tier = cache::TierName(slot.resume.tier);
  report.restore_ms = slot.resume.restore_ms;
  report.restored_bytes = slot.resume.restored_bytes;
  report.stopped_because = slot.resume.stopped_because;
  report.written_tokens = u.cache_written_tokens;
  u.cache = std::move(report);
  return u;
}

void EngineLoop::FailSlot(Slot& slot, const Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests_failed++;
  }
  std::fprintf(stderr, "hearth: request failed: %s\n", error.ToString().c_str());
  if (!slot.task.background) RecordRequest(slot, "failed");
  EndShadow(slot, nullptr, "request failed");
  slot.stream->PushError(error);
  Release(slot, /*keep_in_cache=*/false);
}

// Gives the slot's sequence back to the cache: with everything it computed (prompt and
// decoded tokens, also when cancelled half way), or empty after a failure.
void EngineLoop::Release(Slot& slot, bool keep_in_cache) {
  const engine::SeqId seq = slot.seq;
  wait_for_room_ = false;  // its cells, or the cache's hold on them, can be had now
  if (seq < 0) {
    // Paused: its sequence went to the cache already.
  } else if (keep_in_cache && config_.prefix_cache) {
    std::vector<engine::Token> history = slot.task.prompt;
    history.insert(history.end(), slot.generated.begin(), slot.generated.end());
    history.resize(std::min(history.size(), static_cast<size_t>(ctx_->SeqLength(seq))));
    // A request's reply starts where its shadow forks (warm-ahead renders the same).
    const int32_t reply_start = slot.task.background ? 0 : std::max(0, ShadowFork(slot.task));
    cache_->Adopt(slot.task.cache_namespace, seq, history, reply_start);
    HoldNewest(slot, history);
  } else {
    cache_->Release(seq);
  }
  for (auto& s : slots_) {
    if (s.get() == &slot) s.reset();  // destroys `slot`
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.slots_busy--;
}

// One line per request: what was reused and from where, what was computed, and why
// reuse stopped where it did. prep_ms: from the HTTP request being read (or the task's
// submission) to its admission: parsing, rendering, tokenizing, queueing, the cache's
// lookup and restore. ttft_ms counts from the same point.
void EngineLoop::LogRequest(const Slot& slot, const char* outcome) const {
  const auto now = Clock::now();
  const int n_prompt = static_cast<int>(slot.task.prompt.size());
  const bool first = !slot.generated.empty() || slot.t_prefilled != Clock::time_point{};
  const Clock::time_point start = slot.task.received;
  std::fprintf(stderr,
               "hearth: %s prompt=%d reused=%d (%s, %.1f ms, %.2f MiB) prep_ms=%.1f prefilled=%d prefill_ms=%.1f "
               "generated=%zu ttft_ms=%.1f%s%s\n",
               outcome, n_prompt, slot.n_cached, cache::TierName(slot.resume.tier), slot.resume.restore_ms,
               static_cast<double>(slot.resume.restored_bytes) / (1024.0 * 1024.0), Ms(start, slot.t_admitted),
               static_cast<int>(slot.n_prompt_done) - slot.n_cached,
               first ? Ms(slot.t_admitted, slot.t_prefilled) : Ms(slot.t_admitted, now), slot.generated.size(),
               first ? Ms(start, slot.t_first_token) : -1.0,
               slot.resume.stopped_because.empty() ? "" : " reuse_stopped: ", slot.resume.stopped_because.c_str());
}

}  // namespace hearth::server
