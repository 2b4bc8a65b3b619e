// EngineLoop's shadow prefill: the re-rendered reply fed to a second sequence while the
// reply is generated (server/shadow.h has the targets, docs/cache.md the design). Runs on
// the engine thread like the rest of EngineLoop.
#include "server/engine_loop.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cache/snapshot_policy.h"

namespace hearth::server {
namespace {

// What a slot's shadow sequence holds: prompt[0, fork) + fed.
std::vector<engine::Token> ShadowHolds(const Slot& slot) {
  const Slot::Shadow& sh = *slot.shadow;
  std::vector<engine::Token> tokens(slot.task.prompt.begin(), slot.task.prompt.begin() + sh.fork);
  tokens.insert(tokens.end(), sh.fed.begin(), sh.fed.end());
  return tokens;
}

}  // namespace

// Lends the slot's shadow a sequence holding exactly prompt[0, fork): a fork of the
// request's sequence while it holds just that; once the request has gone past it, one
// reseeded from it (attention) and from the state kept at the fork (the recurrent part).
// Skipped when nothing would render targets, no sequence is to spare, or no state is at
// the fork.
void EngineLoop::StartShadow(Slot& slot) {
  if (slot.shadow || !slot.parser || !on_progress_ || !config_.shadow_prefill) return;
  const int32_t fork = ShadowFork(slot.task);
  const bool at_fork = ctx_->SeqLength(slot.lease.seq()) == fork;
  std::optional<int32_t> seq = at_fork ? cache_->Fork(slot.lease.seq()) : cache_->Lend();
  if (!seq) return;
  cache::SequenceLease lease(*cache_, *seq);
  if (!at_fork) {
    const auto prefix = std::span(slot.task.prompt).subspan(0, static_cast<size_t>(fork));
    if (!cache_->Reseed(slot.task.cache_namespace, prefix, lease.seq(), slot.lease.seq()).ok()) return;
  }
  Slot::Shadow sh;
  sh.lease = std::move(lease);
  sh.fork = fork;
  sh.mailbox = std::make_shared<ShadowMailbox>();
  slot.shadow = std::move(sh);
}

// Hands the reply so far to the renderer when more of it became stable (targets end
// there, see StableTextLength) and no render is in flight. Fed only when the reply ends
// (ShadowFeed::kAfterReply), the shadow needs a recent target then, not one per token:
// within a phase (reasoning, content, tool calls) one every kAfterReplyRenderTokens
// tokens. Each render is a pass of Jinja over the whole conversation on the worker
// thread, which shares the CPU with the decode.
void EngineLoop::PostShadowProgress(Slot& slot) {
  constexpr size_t kAfterReplyRenderTokens = 16;
  Slot::Shadow& sh = *slot.shadow;
  const auto& out = slot.parser->output();
  const int phase = !out.tool_calls.empty() ? 2 : !out.content.empty() ? 1 : 0;
  const std::string& growing = phase == 0 ? out.reasoning : out.content;
  const size_t mark = phase == 2 ? out.tool_calls.size() : StableTextLength(growing);
  if (std::pair(phase, mark) == sh.posted) return;
  if (config_.shadow_feed == ShadowFeed::kAfterReply && phase == sh.posted.first &&
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
  api::Completion partial;
  partial.content = out.content;
  partial.reasoning = out.reasoning;
  for (const auto& call : out.tool_calls) partial.tool_calls.push_back({call.id, call.name, call.arguments});
  on_progress_(slot.task, partial, mailbox);
  if (config_.shadow_wait_ms > 0) {
    std::unique_lock<std::mutex> lock(mailbox->mu);
    mailbox->cv.wait_for(lock, std::chrono::milliseconds(config_.shadow_wait_ms), [&] { return !mailbox->busy; });
  }
}

// Takes the newest target from the mailbox. Returns how many of its tokens the shadow
// has yet to be fed, or -1 when it does not continue what the shadow holds.
int EngineLoop::UnfedShadowTokens(Slot& slot) {
  Slot::Shadow& sh = *slot.shadow;
  {
    std::lock_guard<std::mutex> lock(sh.mailbox->mu);
    if (sh.mailbox->version == sh.version) return sh.version == 0 ? 0 : sh.unfed;
    sh.version = sh.mailbox->version;
    sh.target = std::move(sh.mailbox->target);  // the worker publishes a new one each time
  }
  const auto& t = sh.target.tokens;
  const auto& prompt = slot.task.prompt;
  // It must agree with what the shadow holds as far as both go (a shorter target, with a
  // word cut again, is fine).
  const auto fork = static_cast<size_t>(sh.fork);
  const size_t in_prompt = std::min(t.size(), fork);
  const size_t in_fed = t.size() > fork ? std::min(t.size() - fork, sh.fed.size()) : 0;
  const bool agrees = std::equal(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(in_prompt), t.begin()) &&
                      std::equal(sh.fed.begin(), sh.fed.begin() + static_cast<std::ptrdiff_t>(in_fed),
                                 t.begin() + static_cast<std::ptrdiff_t>(in_prompt));
  if (!agrees && !ReseedShadow(slot)) return sh.unfed = -1;
  const size_t done = static_cast<size_t>(sh.fork) + sh.fed.size();
  sh.unfed = t.size() > done ? static_cast<int>(t.size() - done) : 0;
  return sh.unfed;
}

// The newest target leaves what the shadow holds: the template re-renders something
// before the reply (Qwen3.5 re-renders a finished tool loop once a user message follows),
// or the reply's form changed (a tool call appeared, so reasoning is kept). Starts the
// shadow over from the last message boundary before the difference: attention KV from the
// request's own sequence, the recurrent part from the snapshot there. A few tries per
// request.
bool EngineLoop::ReseedShadow(Slot& slot) {
  constexpr int kMaxReseeds = 3;
  Slot::Shadow& sh = *slot.shadow;
  if (sh.reseeds >= kMaxReseeds) return false;
  ++sh.reseeds;
  const auto& t = sh.target.tokens;
  const auto& prompt = slot.task.prompt;
  const auto& ns = slot.task.cache_namespace;
  const size_t diverged =
      std::min(engine::CommonPrefix(t, prompt), static_cast<size_t>(slot.task.generation_start));
  // The request's own states up to the difference, deepest first.
  const cache::ResumePlan plan = cache_->PlanResume(
      ns, prompt,
      {.kept_at = slot.task.snapshot_positions, .max_depth = static_cast<int32_t>(diverged), .recompute_last = false});
  const int32_t boundary = plan.kept_positions.empty() ? 0 : plan.kept_positions.front();  // the last before it
  // This shadow's own states at message ends past that, on the new target's way (the
  // reply's form changed after a re-rendered tool loop was fed): its sequence holds their
  // attention KV.
  const size_t agree = engine::CommonPrefix(ShadowHolds(slot), t);
  const auto& ends = sh.target.message_ends;
  for (auto it = ends.rbegin(); it != ends.rend(); ++it) {
    if (*it <= boundary) break;
    if (static_cast<size_t>(*it) > agree) continue;
    std::optional<int32_t> seq = cache_->Lend();
    if (!seq) break;
    cache::SequenceLease lease(*cache_, *seq);  // given back unless the reseed works
    if (cache_->Reseed(ns, std::span(t).subspan(0, static_cast<size_t>(*it)), lease.seq(), sh.lease.seq()).ok()) {
      sh.lease = std::move(lease);  // the old sequence goes back first
      sh.fork = 0;
      sh.fed.assign(t.begin(), t.begin() + *it);
      return true;
    }
  }
  // The cache may hold more of the target: an earlier shadow of this conversation that
  // rendered the same thing (an agent's tool loop, re-rendered as it will be once a user
  // message follows, grows by a call and a result per turn, and each turn's shadow
  // renders it again).
  sh.lease.Release();
  auto lease = cache_->Acquire(ns, t, static_cast<int32_t>(t.size()), cache::PrefixCache::Lookup::kInternal);
  if (!lease) return false;  // the shadow holds no sequence now: it ends
  sh.lease = cache::SequenceLease(*cache_, lease->seq);
  if (lease->report.n_reused > boundary) {
    sh.fork = 0;
    sh.fed.assign(t.begin(), t.begin() + lease->report.n_reused);
    sh.fed_content = sh.target.basis_content;
    sh.fed_reasoning = sh.target.basis_reasoning;
    return true;
  }
  // Else the request's own message end before the difference: attention KV from its
  // sequence, the recurrent part from the snapshot there.
  for (int32_t kept : plan.kept_positions) {
    const auto at = static_cast<size_t>(kept);
    if (cache_->Reseed(ns, std::span(prompt).subspan(0, at), sh.lease.seq(), slot.lease.seq()).ok()) {
      sh.fork = kept;
      sh.fed.clear();
      return true;
    }
  }
  return false;
}

// Takes each shadow's newest target; a shadow whose target leaves what it holds, and
// that cannot start over, ends. Returns the rest as the batch planner sees them.
std::vector<ShadowCandidate> EngineLoop::PollShadows() {
  std::vector<ShadowCandidate> shadows;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot* slot = slots_[i].get();
    if (slot == nullptr || !slot->shadow) continue;
    slot->shadow->n_in_batch = 0;
    const int unfed = UnfedShadowTokens(*slot);
    if (unfed < 0) {
      EndShadow(*slot, nullptr, "the reply re-renders differently now");
      continue;
    }
    const Slot::Shadow& sh = *slot->shadow;
    shadows.push_back({.slot = i, .seq = sh.lease.seq(), .target = sh.target.tokens,
                       .n_held = static_cast<size_t>(sh.fork) + sh.fed.size(), .unfed = unfed,
                       .message_ends = sh.target.message_ends});
  }
  return shadows;
}

// The shadow holds the target up to the end of one of its messages: keeps the state
// there (see ShadowTarget::message_ends).
void EngineLoop::KeepShadowStateAtMessageEnd(Slot& slot) {
  Slot::Shadow& sh = *slot.shadow;
  const size_t held = static_cast<size_t>(sh.fork) + sh.fed.size();
  if (!cache::SnapshotPolicy::ShadowKeepsStateAt(sh.target.message_ends, static_cast<int32_t>(held))) return;
  cache_->SnapshotPartial(slot.task.cache_namespace, sh.lease.seq(), ShadowHolds(slot));
}

// The reply ended as `final_reply`: feeds the shadow what its newest target still holds,
// continued through the reply's last word and the end of its turn where the target can
// say how (FinalShadowTokens). The reply's final event waits for this, so it is bounded
// (warm-ahead does the rest) and decoded apart from the step (whose logits are no longer
// needed). A cut-off reply is continued only that way, never with a target that may run
// past what the client read, and keeps states at its last positions on the way: the
// client may have read a piece or two less than was delivered.
void EngineLoop::DrainShadow(Slot& slot, const api::Completion& final_reply, bool cut_off) {
  constexpr int kMaxDrain = 64;
  Slot::Shadow& sh = *slot.shadow;
  int unfed = UnfedShadowTokens(slot);
  if (unfed < 0) return;
  const size_t done = static_cast<size_t>(sh.fork) + sh.fed.size();
  std::optional<int32_t> cut_content_end;  // a cut reply's content end, when the drain continues it
  size_t uncertain = SIZE_MAX;  // a cut reply's: where the positions the client may have read to begin
  const auto tokenize = [this](const std::string& text) {
    return model_.Tokenize(text, /*add_bos=*/false, /*parse_special=*/true);
  };
  auto final_tokens = FinalShadowTokens(sh.target, final_reply, tokenize);
  if (final_tokens && final_tokens->tokens.size() >= done &&
      std::equal(sh.fed.begin(), sh.fed.end(), final_tokens->tokens.begin() + sh.fork)) {
    sh.target.tokens = std::move(final_tokens->tokens);
    sh.target.basis_content = final_reply.content;
    sh.target.basis_reasoning = final_reply.reasoning;
    unfed = sh.unfed = static_cast<int>(sh.target.tokens.size() - done);
    const size_t content_end = final_tokens->content_end;
    if (cut_off && content_end > 0) {
      cut_content_end = static_cast<int32_t>(content_end);
      uncertain = static_cast<size_t>(cache::SnapshotPolicy::FirstCutOffState(*cut_content_end));
    }
    cut_off = false;
  }
  if (unfed <= 0 || cut_off) return;
  const size_t end = done + static_cast<size_t>(std::min({unfed, kMaxDrain, config_.context.n_batch}));
  const std::vector<int32_t> states = cache::SnapshotPolicy::ShadowDrainStates(
      sh.target.message_ends, static_cast<int32_t>(done), static_cast<int32_t>(end), cut_content_end);
  // Each state costs a decode of its own (a weight pass on a CPU). A request waiting gets
  // the engine after the first. When it is this cut reply's next request (a client that
  // cut the reply off sends what it read at once; it carries the reply up to its
  // uncertain end), one last decode goes exactly to where it leaves the target instead.
  const std::string& ns = slot.task.cache_namespace;
  std::vector<engine::Token> held = ShadowHolds(slot);
  bool decoded = false;
  for (size_t k = 0; k < states.size(); ++k) {
    const size_t at = held.size();
    auto stop = static_cast<size_t>(states[k]);
    if (stop <= at || stop > end) continue;
    bool last = k + 1 == states.size();
    if (ForegroundQueued()) {
      if (const size_t next = std::min(QueuedSharedPrefix(ns, sh.target.tokens), end); next > at && next >= uncertain) {
        stop = next;
        last = true;
      } else if (decoded) {
        return;
      }
    }
    decoded = true;
    engine::Batch b;
    for (size_t i = at; i < stop; ++i) b.Add(sh.target.tokens[i], static_cast<engine::Pos>(i), sh.lease.seq(), false);
    if (!ctx_->Decode(b).ok()) return;  // out of room: memory unchanged, keep what was fed
    const auto from = sh.target.tokens.begin() + static_cast<std::ptrdiff_t>(at);
    const auto to = sh.target.tokens.begin() + static_cast<std::ptrdiff_t>(stop);
    sh.fed.insert(sh.fed.end(), from, to);
    held.insert(held.end(), from, to);
    sh.unfed -= static_cast<int>(stop - at);
    sh.fed_content = sh.target.basis_content;
    sh.fed_reasoning = sh.target.basis_reasoning;
    stats_.Update([&](EngineStats& s) { s.shadow_tokens += static_cast<int64_t>(stop - at); });
    if (last) return;  // the shadow's own end: kept as a device state with it
    cache_->SnapshotPartial(ns, sh.lease.seq(), held);
  }
}

// The request is over: the shadow goes to the cache when `final_reply` (what the client
// will send back) still begins with what its target was rendered from; else, or without
// a final reply, it is released.
void EngineLoop::EndShadow(Slot& slot, const api::Completion* final_reply, const char* why, bool cut_off) {
  if (!slot.shadow) return;
  Slot::Shadow& sh = *slot.shadow;
  // A cut-off reply may end before what the target was rendered from (the client read
  // less than was generated): the drain closes what it read (FinalShadowTokens).
  if (final_reply != nullptr && (cut_off || final_reply->content.starts_with(sh.target.basis_content)) &&
      final_reply->reasoning.starts_with(sh.target.basis_reasoning)) {
    DrainShadow(slot, *final_reply, cut_off);
  }
  const bool agrees = final_reply != nullptr && final_reply->content.starts_with(sh.fed_content) &&
                      final_reply->reasoning.starts_with(sh.fed_reasoning);
  const bool keep = agrees && !sh.fed.empty() && sh.lease.held();
  if (keep) {
    const std::vector<engine::Token> held = ShadowHolds(slot);
    sh.lease.Adopt(slot.task.cache_namespace, held);
    HoldNewest(slot, held);  // the next turn resumes from the re-rendered reply
  } else {
    sh.lease.Release();
  }
  // A shadow that was never fed (nothing to re-render yet) is neither kept nor dropped.
  if (!sh.fed.empty()) {
    if (!keep && config_.verbose) {
      std::fprintf(stderr, "hearth: shadow of %zu tokens dropped: %s\n", sh.fed.size(),
                   final_reply != nullptr ? "the final reply differs from what it was rendered from" : why);
    }
    stats_.Update([&](EngineStats& s) { (keep ? s.shadows_kept : s.shadows_dropped)++; });
  } else if (final_reply == nullptr && config_.verbose) {
    std::fprintf(stderr, "hearth: shadow ended before it was fed: %s\n", why);
  }
  slot.shadow.reset();
}

// Releases the shadow of the youngest request; false when there is none.
bool EngineLoop::DropOneShadow() {
  Slot* youngest = nullptr;
  for (auto& slot : slots_) {
    if (slot && slot->shadow && (!youngest || slot->t_admitted > youngest->t_admitted)) youngest = slot.get();
  }
  if (youngest == nullptr) return false;
  EndShadow(*youngest, nullptr, "its sequence or KV cells were needed");
  return true;
}

}  // namespace hearth::server
