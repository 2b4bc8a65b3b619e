// ShadowPrefill's drain (shadow_prefill.h): when a reply ends, the shadow is fed what
// its newest target still holds, in a few decodes of its own.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "cache/snapshot_policy.h"
#include "server/shadow_prefill.h"

namespace hearth::server {
namespace {

using std::ptrdiff_t;

}  // namespace

// What a finished reply's drain does: decodes from what the shadow holds to each of
// `states` in turn, none past `end` (one of them), keeping a state at each but the last
// it reaches (the shadow's own end, kept with it).
struct ShadowPrefill::DrainPlan {
  std::vector<size_t> states;   // ascending
  size_t end = 0;
  size_t uncertain = SIZE_MAX;  // a cut reply's: where the positions the client may have read to begin
};

void ShadowPrefill::DrainRest(Slot& slot, const api::Completion& final_reply, bool cut_off,
                              const QueuedPrefixFn& queued) {
  if (const std::optional<DrainPlan> plan = PlanDrain(slot, final_reply, cut_off)) Drain(slot, *plan, queued);
}

// What the drain of a reply that ended as `final_reply` feeds: what the newest target
// still holds, continued through the reply's last word and the end of its turn where
// the target can say how (FinalShadowTokens). The reply's final event waits for the
// drain, so it is bounded (warm-ahead does the rest). A cut-off reply is continued only
// that way, never with a target that may run past what the client read, and keeps states
// at its last positions on the way. A rest of at most kDrainSlack past the bound is
// drained too: left to warm-ahead it would cost a decode of its own, a whole weight pass on
// a CPU, which a client that answers at once waits for (a 64-token reply ends 69 tokens
// past what an after-reply shadow holds). nullopt: nothing to feed.
std::optional<ShadowPrefill::DrainPlan> ShadowPrefill::PlanDrain(Slot& slot, const api::Completion& final_reply,
                                                                 bool cut_off) {
  constexpr int kMaxDrain = 64;
  constexpr int kDrainSlack = 16;
  Slot::Shadow& sh = *slot.shadow;
  int unfed = UnfedTokens(slot);
  if (unfed < 0) return std::nullopt;
  const size_t done = static_cast<size_t>(sh.fork) + sh.fed.size();
  DrainPlan plan;
  std::optional<int32_t> cut_content_end;  // a cut reply's content end, when the drain continues it
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
    if (cut_off && final_tokens->content_end > 0) {
      cut_content_end = static_cast<int32_t>(final_tokens->content_end);
      plan.uncertain = static_cast<size_t>(cache::SnapshotPolicy::FirstCutOffState(*cut_content_end));
    }
    cut_off = false;
  }
  if (unfed <= 0 || cut_off) return std::nullopt;
  const int bound = unfed <= kMaxDrain + kDrainSlack ? unfed : kMaxDrain;
  plan.end = done + static_cast<size_t>(std::min(bound, options_.n_batch));
  for (int32_t p : cache::SnapshotPolicy::ShadowDrainStates(sh.target.message_ends, static_cast<int32_t>(done),
                                                            static_cast<int32_t>(plan.end), cut_content_end)) {
    plan.states.push_back(static_cast<size_t>(p));
  }
  return plan;
}

// Each state costs a decode of its own (a weight pass on a CPU), decoded apart from the
// step (whose logits are no longer needed). A request waiting gets the engine after the
// first. When it is this cut reply's next request (a client that cut the reply off sends
// what it read at once; it carries the reply up to its uncertain end), one last decode
// goes exactly to where it leaves the target instead.
void ShadowPrefill::Drain(Slot& slot, const DrainPlan& plan, const QueuedPrefixFn& queued) {
  Slot::Shadow& sh = *slot.shadow;
  std::vector<engine::Token> held = ShadowHolds(slot);
  bool decoded = false;
  for (size_t k = 0; k < plan.states.size(); ++k) {
    const size_t at = held.size();
    size_t stop = plan.states[k];
    if (stop <= at || stop > plan.end) continue;
    bool last = k + 1 == plan.states.size();
    if (const std::optional<size_t> shared = queued(sh.target.tokens)) {
      if (const size_t next = std::min(*shared, plan.end); next > at && next >= plan.uncertain) {
        stop = next;
        last = true;
      } else if (decoded) {
        return;
      }
    }
    decoded = true;
    if (!DecodeInto(sh, at, stop)) return;  // out of room: memory unchanged, keep what was fed
    held.insert(held.end(), sh.target.tokens.begin() + static_cast<ptrdiff_t>(at),
                sh.target.tokens.begin() + static_cast<ptrdiff_t>(stop));
    if (last) return;  // the shadow's own end: kept as a device state with it
    cache_.SnapshotPartial(slot.task.cache_namespace, sh.lease.seq(), held);
  }
}

// Decodes target tokens [at, stop) into the shadow's sequence and records them as fed.
// False when the decode failed (the memory is as it was, nothing recorded).
bool ShadowPrefill::DecodeInto(Slot::Shadow& sh, size_t at, size_t stop) {
  engine::Batch b;
  for (size_t i = at; i < stop; ++i) b.Add(sh.target.tokens[i], static_cast<engine::Pos>(i), sh.lease.seq(), false);
  if (!ctx_.Decode(b).ok()) return false;
  sh.fed.insert(sh.fed.end(), sh.target.tokens.begin() + static_cast<ptrdiff_t>(at),
                sh.target.tokens.begin() + static_cast<ptrdiff_t>(stop));
  sh.unfed -= static_cast<int>(stop - at);
  sh.fed_content = sh.target.basis_content;
  sh.fed_reasoning = sh.target.basis_reasoning;
  stats_.Update([&](EngineStats& s) { s.shadow_tokens += static_cast<int64_t>(stop - at); });
  return true;
}

}  // namespace hearth::server
