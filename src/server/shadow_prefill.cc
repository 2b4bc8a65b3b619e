#include "server/shadow_prefill.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <utility>

#include "cache/snapshot_policy.h"
#include "server/output_pipeline.h"

namespace hearth::server {
namespace {

using std::ptrdiff_t;

// The reply so far as the renderer takes it.
api::Completion PartialReply(const engine::ParsedOutput& out) {
  api::Completion partial;
  partial.content = out.content;
  partial.reasoning = out.reasoning;
  for (const auto& call : out.tool_calls) partial.tool_calls.push_back({call.id, call.name, call.arguments});
  return partial;
}

// Whether `target` agrees with what the shadow holds, prompt[0, fork) + fed, as far as
// both go (a shorter target, with a word cut again, is fine).
bool AgreesWithHeld(const std::vector<engine::Token>& target, const std::vector<engine::Token>& prompt, size_t fork,
                    const std::vector<engine::Token>& fed) {
  const size_t in_prompt = std::min(target.size(), fork);
  const size_t in_fed = target.size() > fork ? std::min(target.size() - fork, fed.size()) : 0;
  return std::equal(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(in_prompt), target.begin()) &&
         std::equal(fed.begin(), fed.begin() + static_cast<ptrdiff_t>(in_fed),
                    target.begin() + static_cast<ptrdiff_t>(in_prompt));
}

}  // namespace

ShadowFeed DefaultShadowFeed() { return engine::GpuOffloadBuilt() ? ShadowFeed::kWithDecode : ShadowFeed::kPaced; }

const char* ShadowFeedName(ShadowFeed feed) {
  switch (feed) {
    case ShadowFeed::kOff: return "off";
    case ShadowFeed::kWithDecode: return "with-decode";
    case ShadowFeed::kAfterReply: return "after-reply";
    case ShadowFeed::kReplyEnd: return "reply-end";
    case ShadowFeed::kPaced: return "paced";
  }
  return "after-reply";
}

std::vector<engine::Token> ShadowHolds(const Slot& slot) {
  const Slot::Shadow& sh = *slot.shadow;
  std::vector<engine::Token> tokens(slot.task.prompt.begin(), slot.task.prompt.begin() + sh.fork);
  tokens.insert(tokens.end(), sh.fed.begin(), sh.fed.end());
  return tokens;
}

ShadowPrefill::ShadowPrefill(const engine::Model& model, engine::Context& ctx, cache::PrefixCache& cache,
                             Options options, StatsBoard& stats, const ShadowProgressCallback& on_progress) :
    model_(model), ctx_(ctx), cache_(cache), options_(options), stats_(stats), on_progress_(on_progress) {}

void ShadowPrefill::Start(Slot& slot) {
  if (slot.shadow || !slot.output || !slot.output->parsed() || !on_progress_ || options_.feed == ShadowFeed::kOff) {
    return;
  }
  const int32_t fork = ShadowFork(slot.task);
  const bool at_fork = ctx_.SeqLength(slot.lease.seq()) == fork;
  std::optional<int32_t> seq = at_fork ? cache_.Fork(slot.lease.seq()) : cache_.Lend();
  if (!seq) return;
  cache::SequenceLease lease(cache_, *seq);
  if (!at_fork) {
    const auto prefix = std::span(slot.task.prompt).subspan(0, static_cast<size_t>(fork));
    if (!cache_.Reseed(slot.task.cache_namespace, prefix, lease.seq(), slot.lease.seq()).ok()) return;
  }
  Slot::Shadow sh;
  sh.lease = std::move(lease);
  sh.fork = fork;
  sh.mailbox = std::make_shared<ShadowMailbox>();
  slot.shadow = std::move(sh);
}

// Targets end where more text cannot tokenize differently (StableTextLength). Fed only
// when the reply ends (kAfterReply, kReplyEnd), the shadow needs a recent target then, not one per
// token: within a phase (reasoning, content, tool calls) one every
// kAfterReplyRenderTokens tokens. Each render is a pass of Jinja over the whole
// conversation on the worker thread, which shares the CPU with the decode.
void ShadowPrefill::PostProgress(Slot& slot) {
  constexpr size_t kAfterReplyRenderTokens = 16;
  Slot::Shadow& sh = *slot.shadow;
  const engine::ParsedOutput& out = *slot.output->parsed();
  const int phase = !out.tool_calls.empty() ? 2 : !out.content.empty() ? 1 : 0;
  const std::string& growing = phase == 0 ? out.reasoning : out.content;
  const size_t mark = phase == 2 ? out.tool_calls.size() : StableTextLength(growing);
  if (std::pair(phase, mark) == sh.posted) return;
  if (options_.feed != ShadowFeed::kWithDecode && phase == sh.posted.first &&
      slot.generated.size() < sh.posted_at + kAfterReplyRenderTokens) {
    return;
  }
  auto mailbox = sh.mailbox;
  {
    std::lock_guard<std::mutex> lock(mailbox->mu);
    if (mailbox->busy) return;
    mailbox->busy = true;
  }
  sh.posted = {phase, mark};
  sh.posted_at = slot.generated.size();
  stats_.Update([](EngineStats& s) { s.shadow_renders++; });
  on_progress_(slot.task, PartialReply(out), mailbox);
  if (options_.wait_ms > 0) {
    std::unique_lock<std::mutex> lock(mailbox->mu);
    mailbox->cv.wait_for(lock, std::chrono::milliseconds(options_.wait_ms), [&] { return !mailbox->busy; });
  }
}

// Whether the shadow's `unfed` tokens may go beside the decode in whole tiles (without
// shadows in the steps): kPaced asks the namespace's clients' pauses, the others decide
// alone.
bool ShadowPrefill::TakesTiles(const Slot& slot, int unfed) const {
  switch (options_.feed) {
    case ShadowFeed::kReplyEnd: return false;
    case ShadowFeed::kPaced:
      return options_.pause == nullptr || !options_.pause->HoldsPrefill(slot.task.cache_namespace, unfed);
    default: return true;
  }
}

// Takes the newest target from the mailbox. Returns how many of its tokens the shadow
// has yet to be fed, or -1 when it does not continue what the shadow holds.
int ShadowPrefill::UnfedTokens(Slot& slot) {
  Slot::Shadow& sh = *slot.shadow;
  {
    std::lock_guard<std::mutex> lock(sh.mailbox->mu);
    if (sh.mailbox->version == sh.version) return sh.version == 0 ? 0 : sh.unfed;
    sh.version = sh.mailbox->version;
    sh.target = std::move(sh.mailbox->target);  // the worker publishes a new one each time
  }
  const auto& t = sh.target.tokens;
  if (!AgreesWithHeld(t, slot.task.prompt, static_cast<size_t>(sh.fork), sh.fed) && !Reseed(slot)) {
    return sh.unfed = -1;
  }
  const size_t done = static_cast<size_t>(sh.fork) + sh.fed.size();
  sh.unfed = t.size() > done ? static_cast<int>(t.size() - done) : 0;
  return sh.unfed;
}

// The newest target leaves what the shadow holds: the template re-renders something
// before the reply (Qwen3.5 re-renders a finished tool loop once a user message follows),
// or the reply's form changed (a tool call appeared, so reasoning is kept). Starts the
// shadow over from the last message boundary before the difference, in the first way
// that works: its own state at a later message end on the target's way; an earlier
// shadow's state the cache holds further along the target; the request's own sequence
// and snapshot there. A few tries per request.
bool ShadowPrefill::Reseed(Slot& slot) {
  constexpr int kMaxReseeds = 3;
  Slot::Shadow& sh = *slot.shadow;
  if (sh.reseeds >= kMaxReseeds) return false;
  ++sh.reseeds;
  const auto& t = sh.target.tokens;
  const size_t diverged =
      std::min(engine::CommonPrefix(t, slot.task.prompt), static_cast<size_t>(slot.task.generation_start));
  // The request's own states up to the difference, deepest first.
  const cache::ResumePlan plan = cache_.PlanResume(
      slot.task.cache_namespace, slot.task.prompt,
      {.kept_at = slot.task.snapshot_positions, .max_depth = static_cast<int32_t>(diverged), .recompute_last = false});
  const int32_t boundary = plan.kept_positions.empty() ? 0 : plan.kept_positions.front();  // the last before it
  if (ReseedAtOwnMessageEnd(slot, boundary)) return true;
  // The cache may hold more of the target: an earlier shadow of this conversation that
  // rendered the same thing (an agent's tool loop, re-rendered as it will be once a user
  // message follows, grows by a call and a result per turn, and each turn's shadow
  // renders it again).
  sh.lease.Release();
  auto lease =
      cache_.Acquire(slot.task.cache_namespace, t, static_cast<int32_t>(t.size()), cache::PrefixCache::Lookup::kInternal);
  if (!lease) return false;  // the shadow holds no sequence now: it ends
  sh.lease = cache::SequenceLease(cache_, lease->seq);
  if (lease->report.n_reused > boundary) {
    sh.fork = 0;
    sh.fed.assign(t.begin(), t.begin() + lease->report.n_reused);
    sh.fed_content = sh.target.basis_content;
    sh.fed_reasoning = sh.target.basis_reasoning;
    return true;
  }
  return ReseedAtRequestMark(slot, plan.kept_positions);
}

// This shadow's own states at message ends past `boundary`, on the new target's way (the
// reply's form changed after a re-rendered tool loop was fed): its sequence holds their
// attention KV. Tries the latest first.
bool ShadowPrefill::ReseedAtOwnMessageEnd(Slot& slot, int32_t boundary) {
  Slot::Shadow& sh = *slot.shadow;
  const auto& t = sh.target.tokens;
  const size_t agree = engine::CommonPrefix(ShadowHolds(slot), t);
  const auto& ends = sh.target.message_ends;
  for (auto it = ends.rbegin(); it != ends.rend(); ++it) {
    if (*it <= boundary) break;
    if (static_cast<size_t>(*it) > agree) continue;
    std::optional<int32_t> seq = cache_.Lend();
    if (!seq) break;
    cache::SequenceLease lease(cache_, *seq);  // given back unless the reseed works
    const auto prefix = std::span(t).subspan(0, static_cast<size_t>(*it));
    if (cache_.Reseed(slot.task.cache_namespace, prefix, lease.seq(), sh.lease.seq()).ok()) {
      sh.lease = std::move(lease);  // the old sequence goes back first
      sh.fork = 0;
      sh.fed.assign(t.begin(), t.begin() + *it);
      return true;
    }
  }
  return false;
}

// The request's own states before the difference (`kept`, deepest first): attention KV from
// its sequence, the recurrent part from the snapshot there. REQUIRES: the shadow holds a
// sequence.
bool ShadowPrefill::ReseedAtRequestMark(Slot& slot, std::span<const int32_t> kept) {
  Slot::Shadow& sh = *slot.shadow;
  for (int32_t at : kept) {
    const auto prefix = std::span(slot.task.prompt).subspan(0, static_cast<size_t>(at));
    if (cache_.Reseed(slot.task.cache_namespace, prefix, sh.lease.seq(), slot.lease.seq()).ok()) {
      sh.fork = at;
      sh.fed.clear();
      return true;
    }
  }
  return false;
}

std::vector<ShadowCandidate> ShadowPrefill::Poll(SlotTable& slots) {
  std::vector<ShadowCandidate> shadows;
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot* slot = slots[i].get();
    if (slot == nullptr || !slot->shadow) continue;
    slot->shadow->n_in_batch = 0;
    const int unfed = UnfedTokens(*slot);
    if (unfed < 0) {
      Drop(*slot, "the reply re-renders differently now");
      continue;
    }
    const Slot::Shadow& sh = *slot->shadow;
    shadows.push_back({.slot = i, .seq = sh.lease.seq(), .target = sh.target.tokens,
                       .n_held = static_cast<size_t>(sh.fork) + sh.fed.size(), .unfed = unfed,
                       .message_ends = sh.target.message_ends, .tiles = TakesTiles(*slot, unfed)});
  }
  return shadows;
}

void ShadowPrefill::RecordFed(SlotTable& slots) {
  int64_t fed = 0;
  for (auto& slot : slots) {
    if (!slot || !slot->shadow || slot->shadow->n_in_batch == 0) continue;
    Slot::Shadow& sh = *slot->shadow;
    const auto from = sh.target.tokens.begin() + sh.fork + static_cast<ptrdiff_t>(sh.fed.size());
    sh.fed.insert(sh.fed.end(), from, from + static_cast<ptrdiff_t>(sh.n_in_batch));
    sh.unfed -= static_cast<int>(sh.n_in_batch);
    sh.fed_content = sh.target.basis_content;
    sh.fed_reasoning = sh.target.basis_reasoning;
    fed += static_cast<int64_t>(sh.n_in_batch);
    sh.n_in_batch = 0;
    KeepStateAtMessageEnd(*slot);
  }
  if (fed > 0) {
    stats_.Update([&](EngineStats& s) {
      s.shadow_tokens += fed;
      s.shadow_tokens_with_decode += fed;
    });
  }
}

// The shadow holds the target up to the end of one of its messages: keeps the state
// there (see ShadowTarget::message_ends).
void ShadowPrefill::KeepStateAtMessageEnd(Slot& slot) {
  Slot::Shadow& sh = *slot.shadow;
  const size_t held = static_cast<size_t>(sh.fork) + sh.fed.size();
  if (!cache::SnapshotPolicy::ShadowKeepsStateAt(sh.target.message_ends, static_cast<int32_t>(held))) return;
  cache_.SnapshotPartial(slot.task.cache_namespace, sh.lease.seq(), ShadowHolds(slot));
}

std::optional<std::vector<engine::Token>> ShadowPrefill::Finish(Slot& slot, const api::Completion& final_reply,
                                                                bool cut_off, const QueuedPrefixFn& queued) {
  if (!slot.shadow) return std::nullopt;
  Slot::Shadow& sh = *slot.shadow;
  // A cut-off reply may end before what the target was rendered from (the client read
  // less than was generated): the drain closes what it read (FinalShadowTokens).
  if ((cut_off || final_reply.content.starts_with(sh.target.basis_content)) &&
      final_reply.reasoning.starts_with(sh.target.basis_reasoning)) {
    DrainRest(slot, final_reply, cut_off, queued);
  }
  const bool agrees =
      final_reply.content.starts_with(sh.fed_content) && final_reply.reasoning.starts_with(sh.fed_reasoning);
  std::optional<std::vector<engine::Token>> kept;
  if (agrees && !sh.fed.empty() && sh.lease.held()) {
    kept = ShadowHolds(slot);
    sh.lease.Adopt(slot.task.cache_namespace, *kept);
  }
  Close(slot, kept.has_value(), /*had_final_reply=*/true, "");
  return kept;
}

void ShadowPrefill::Drop(Slot& slot, const char* why) {
  if (!slot.shadow) return;
  Close(slot, /*keep=*/false, /*had_final_reply=*/false, why);
}

// Ends the shadow: released unless kept (then adopted already), counted, and logged
// when dropped. A shadow that was never fed (nothing to re-render yet) is neither kept
// nor dropped.
void ShadowPrefill::Close(Slot& slot, bool keep, bool had_final_reply, const char* why) {
  Slot::Shadow& sh = *slot.shadow;
  if (!keep) sh.lease.Release();
  if (!sh.fed.empty()) {
    if (!keep && options_.verbose) {
      std::fprintf(stderr, "hearth: shadow of %zu tokens dropped: %s\n", sh.fed.size(),
                   had_final_reply ? "the final reply differs from what it was rendered from" : why);
    }
    stats_.Update([&](EngineStats& s) { (keep ? s.shadows_kept : s.shadows_dropped)++; });
  } else if (!had_final_reply && options_.verbose) {
    std::fprintf(stderr, "hearth: shadow ended before it was fed: %s\n", why);
  }
  slot.shadow.reset();
}

bool ShadowPrefill::DropYoungest(SlotTable& slots) {
  Slot* youngest = nullptr;
  for (auto& slot : slots) {
    if (slot && slot->shadow && (!youngest || slot->t_admitted > youngest->t_admitted)) youngest = slot.get();
  }
  if (youngest == nullptr) return false;
  Drop(*youngest, "its sequence or KV cells were needed");
  return true;
}

}  // namespace hearth::server
