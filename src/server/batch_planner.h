// BatchPlanner: what one engine step decodes, decided from the slots alone. A pure
// function of its inputs: no model, no context, no cache; the engine loop turns the plan
// into an engine::Batch, decodes it, and only after a successful decode moves each
// request's prefill progress to SlotPlan::n_prompt_done_after (a failed decode leaves the
// sequences as they were, so there is nothing to rewind).
//
// Threads: none of its own; the engine loop calls it on the engine thread.
//
// Invariants of the plan PlanBatch returns:
//  1. Tokens come in this order: one decode token per generating slot (slot order), then
//     prefill chunks (slot order), then shadow chunks (slot order).
//  2. Prefill and shadow tokens never exceed limits.n_batch less the decode tokens.
//  3. A prefill chunk never runs past its slot's next snapshot position, so the state
//     there can be kept once it is decoded; a shadow chunk never runs past its target's
//     next message end.
//  4. Background (warm-ahead) chunks are at most limits.background_chunk tokens (one
//     more in a step with decode tokens, so that a hybrid model's ubatch split leaves a
//     whole chunk after the decode tokens' ubatch; shadow tiles likewise), never
//     ask for logits, and none is planned while a request prefills.
//  5. A request's last prompt token, and every decode token, asks for logits; its index
//     in the plan is the slot's logits_index.
//  6. Without limits.shadows_in_steps a shadow token is planned only in whole tiles, and
//     only for a shadow whose ShadowCandidate::tiles is set.
//  7. A request's prefill chunk in a step without decode tokens takes what the budget
//     allows toward its stop (next snapshot position or prompt end), less where that
//     would end the decode in a ubatch shorter than limits.prefill_floor after whole ones
//     (the last two ubatches' worth then goes in two decodes) or leave the next chunk
//     fewer than limits.prefill_floor tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/types.h"

namespace hearth::server {

// One occupied slot as the planner sees it.
struct BatchCandidate {
  size_t slot = 0;                       // the loop's slot index, echoed in SlotPlan
  engine::SeqId seq = 0;
  engine::Pos n_past = 0;                // positions its sequence holds
  std::optional<engine::Token> pending;  // generating: the sampled token to decode next
  std::span<const engine::Token> prompt;  // must outlive the call
  size_t n_prompt_done = 0;              // prompt tokens its sequence holds
  std::optional<size_t> next_snapshot;   // the next snapshot position, > n_prompt_done
  bool background = false;               // warm-ahead prefill: no output
};

// A slot's shadow (shadow.h) with target tokens waiting to be fed.
struct ShadowCandidate {
  size_t slot = 0;
  engine::SeqId seq = 0;
  std::span<const engine::Token> target;     // from the prompt's first token; must outlive the call
  size_t n_held = 0;                         // positions the shadow holds (fork + fed)
  int unfed = 0;                             // target tokens past n_held, >= 0
  std::span<const int32_t> message_ends;     // ascending
  // Without limits.shadows_in_steps: whether it may take whole tiles beside the decode
  // (server::ShadowFeed decides: never with kReplyEnd, by the client's pause with kPaced).
  bool tiles = true;
};

struct BatchLimits {
  int n_batch = 512;          // tokens per decode
  int n_ubatch = 512;         // tokens per ubatch, into which llama.cpp splits a decode
  // Ubatches of fewer tokens cost several times more a token (engine::Context::
  // efficient_batch_floor); 1: none do.
  int prefill_floor = 1;
  int background_chunk = 32;  // tokens per step for warm-ahead prefill
  int shadow_chunk = 8;       // the smallest shadow chunk; fewer waiting: none this step
  // Whether shadows are fed in these steps, beside their replies' decode tokens (a shadow
  // lives only while its reply decodes). false (server::ShadowFeed::kAfterReply and the
  // others made for a CPU, where a step's every token costs compute): only in whole
  // background chunks while two or more wait, and only for a shadow whose `tiles` is set;
  // the rest when their reply ends.
  bool shadows_in_steps = true;
};

struct PlannedToken {
  engine::Token token = 0;
  engine::Pos pos = 0;
  engine::SeqId seq = 0;
  bool logits = false;
};

struct SlotPlan {
  size_t slot = 0;
  bool in_batch = false;               // has tokens in the plan
  std::optional<int> logits_index;     // its logits row, when it samples after the decode
  size_t n_prompt_done_after = 0;      // prompt tokens its sequence holds once decoded
};

struct BatchPlan {
  std::vector<PlannedToken> tokens;
  std::vector<SlotPlan> slots;        // one per candidate, in the candidates' order
  std::vector<size_t> shadow_tokens;  // per shadow candidate: its target tokens in the plan
};

// REQUIRES: candidates in ascending slot order, shadows too.
BatchPlan PlanBatch(std::span<const BatchCandidate> candidates, std::span<const ShadowCandidate> shadows,
                    const BatchLimits& limits);

}  // namespace hearth::server
