#include "server/batch_planner.h"

#include <algorithm>

namespace hearth::server {
namespace {

bool Prefilling(const BatchCandidate& c) { return c.n_prompt_done < c.prompt.size(); }

int Add(BatchPlan& plan, engine::Token token, engine::Pos pos, engine::SeqId seq, bool logits) {
  plan.tokens.push_back({token, pos, seq, logits});
  return static_cast<int>(plan.tokens.size()) - 1;
}

// A background chunk's length: limits.background_chunk, one token more beside decode
// tokens. llama.cpp splits a hybrid model's batch into ubatches of as many tokens from
// each sequence (split_equal): the decode tokens go with each chunk's first token, and
// the chunk's rest makes a ubatch of its own, which must stay a whole flash-attention
// tile (small qwen35 at 11k tokens of context: a 64-token shadow tile beside a decode
// token took 2.9 s, its 63-token rest run row by row; a 64-token ubatch costs ~0.8 s).
int BackgroundChunk(const BatchLimits& limits, bool beside_decode) {
  return limits.background_chunk + (beside_decode ? 1 : 0);
}

// How many of the `left` tokens before a request's next stop one decode of at most `room`
// tokens takes (invariant 7). llama.cpp runs a decode as ubatches of limits.n_ubatch
// tokens and what is left over; where a ubatch of fewer than limits.prefill_floor tokens
// costs several times more a token (flash attention on a CPU), such a remainder after
// whole ubatches is avoided: the last two ubatches' worth is split into two decodes of
// about half each (540 tokens: 270 and 270, not 512 and 28), and a decode that does not
// reach the stop leaves at least the floor for the next. Alone in the step only: beside
// decode tokens the ubatch split depends on the model (a hybrid model's puts each
// sequence's first token with the decode tokens).
size_t PrefillChunk(size_t left, size_t room, const BatchLimits& limits, bool beside_decode) {
  const size_t take = std::min(left, room);
  const auto ubatch = static_cast<size_t>(limits.n_ubatch);
  const auto floor = static_cast<size_t>(limits.prefill_floor);
  if (beside_decode || floor <= 1 || ubatch < 2 * floor) return take;
  if (take == left) {
    const size_t tail = left % ubatch;
    if (left < ubatch || tail == 0 || tail >= floor) return left;
    return left - (ubatch + tail + 1) / 2;
  }
  if (take < ubatch) return take;
  const size_t whole = take / ubatch * ubatch;
  return left - whole >= floor ? whole : left - floor;
}

// The prompt's next chunk: up to the next snapshot position, within the budget.
void PlanPrefill(const BatchCandidate& c, const BatchLimits& limits, bool beside_decode, int& budget, BatchPlan& plan,
                 SlotPlan& sp) {
  size_t stop = c.prompt.size();
  if (c.next_snapshot) stop = std::min(stop, *c.next_snapshot);
  // Background chunks stay small: a request arriving meanwhile waits at most for one.
  const size_t end =
      c.n_prompt_done + (c.background ? std::min({stop - c.n_prompt_done, static_cast<size_t>(budget),
                                                  static_cast<size_t>(BackgroundChunk(limits, beside_decode))})
                                      : PrefillChunk(stop - c.n_prompt_done, static_cast<size_t>(budget), limits,
                                                     beside_decode));
  const bool sample_after = !c.background;
  for (size_t j = c.n_prompt_done; j < end; ++j) {
    const bool last = j + 1 == c.prompt.size() && sample_after;
    const int idx = Add(plan, c.prompt[j], c.n_past + static_cast<engine::Pos>(j - c.n_prompt_done), c.seq, last);
    if (last) sp.logits_index = idx;
  }
  sp.in_batch = end > c.n_prompt_done;
  budget -= static_cast<int>(end - c.n_prompt_done);
  sp.n_prompt_done_after = end;
}

// The target's next chunk, none while fewer than one chunk waits: on a CPU a batch's
// tokens cost nearly their full compute each, and a few at a time far more per token
// than eight (small model, one thread: 1 decode token 65 ms, +1 token 38 ms, +7 tokens
// 113 ms). What is left when the reply ends is fed then, in one decode. Further behind
// (a re-rendered tool loop), bigger chunks: the work must be done before the next turn
// anyway, and next to a decode token it costs little on a GPU. Where it does not
// (limits.shadows_in_steps false: a CPU), only whole background chunks (one flash-attention
// tile) while two or more wait, as a re-rendered tool loop does: per token those cost what
// the next turn's own prefill would, and the drain at the reply's end takes at most one.
// A shadow without `tiles` gets none: the reply decodes alone, and warm-ahead takes the
// rest in the pause after it.
size_t PlanShadow(const ShadowCandidate& s, const BatchLimits& limits, bool beside_decode, int& budget,
                  BatchPlan& plan) {
  const size_t at = s.n_held;
  const auto next_end = [&](size_t from) {
    auto it = std::upper_bound(s.message_ends.begin(), s.message_ends.end(), static_cast<int32_t>(from));
    return it == s.message_ends.end() ? SIZE_MAX : static_cast<size_t>(*it);
  };
  size_t n = 0;
  if (limits.shadows_in_steps) {
    const int k = limits.shadow_chunk;
    if (s.unfed < k) return 0;
    const int chunk = s.unfed > 256 ? 4 * k : s.unfed > 64 ? 2 * k : k;
    n = static_cast<size_t>(std::min({s.unfed, chunk, std::max(budget, 0)}));
    // Up to the next message end, where the shadow keeps a state.
    if (const size_t end = next_end(at); end < at + n) n = end - at;
  } else {
    if (!s.tiles) return 0;
    const int tile = BackgroundChunk(limits, beside_decode);
    if (s.unfed < 2 * tile || budget < 2 * tile) return 0;
    n = static_cast<size_t>(tile);
    // A message end within the next tile ends this chunk instead, for the state kept
    // there; ends closer than a tile are passed (a shorter chunk costs a whole tile).
    if (const size_t end = next_end(at + n - 1); end < at + 2 * n) n = end - at;
  }
  for (size_t i = 0; i < n; ++i) Add(plan, s.target[at + i], static_cast<engine::Pos>(at + i), s.seq, false);
  budget -= static_cast<int>(n);
  return n;
}

}  // namespace

BatchPlan PlanBatch(std::span<const BatchCandidate> candidates, std::span<const ShadowCandidate> shadows,
                    const BatchLimits& limits) {
  BatchPlan plan;
  int budget = limits.n_batch;
  for (const BatchCandidate& c : candidates) {
    SlotPlan sp{.slot = c.slot, .n_prompt_done_after = c.n_prompt_done};
    if (c.pending) {
      sp.in_batch = true;
      sp.logits_index = Add(plan, *c.pending, c.n_past, c.seq, true);
      --budget;
    }
    plan.slots.push_back(sp);
  }
  const bool beside_decode = !plan.tokens.empty();
  // Background work waits while a request prefills: it would lengthen that request's
  // decodes and put its snapshots before that request's first token.
  const bool foreground_prefilling =
      std::any_of(candidates.begin(), candidates.end(), [](const auto& c) { return Prefilling(c) && !c.background; });
  for (size_t i = 0; i < candidates.size(); ++i) {
    const BatchCandidate& c = candidates[i];
    if (!Prefilling(c) || budget <= 0) continue;
    if (c.background && foreground_prefilling) continue;
    PlanPrefill(c, limits, beside_decode, budget, plan, plan.slots[i]);
  }
  for (const ShadowCandidate& s : shadows) {
    plan.shadow_tokens.push_back(PlanShadow(s, limits, beside_decode, budget, plan));
  }
  return plan;
}

}  // namespace hearth::server
