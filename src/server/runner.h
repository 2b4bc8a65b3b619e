// Runner: one engine step's decode. It lays the batch planner's plan (batch_planner.h) out
// as the engine's batch, decodes it (making KV room through the caller when the cells run
// out), moves prefill progress once a decode succeeded, and samples each slot's next token
// from its logits row.
//
// Threads: the engine loop's only; it shares the loop's engine::Context.
//
// Invariants:
//  1. The batch is exactly the last plan: every slot's in_batch and logits_index, and
//     every shadow's n_in_batch, describe the batch being decoded.
//  2. Prefill progress (Slot::n_prompt_done) moves only in AdvanceProgress, after a
//     decode of the current plan succeeded; a failed decode changes no slot.
//  3. Between a decode and the next Plan the context's logits are the batch's, so Sample
//     reads the row the plan gave the slot.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/context.h"
#include "server/batch_planner.h"
#include "server/slot.h"

namespace hearth::server {

class Runner {
 public:
  Runner(engine::Context& ctx, BatchLimits limits) : ctx_(ctx), limits_(limits) {}

  // Plans the step for the occupied slots and the shadows with tokens waiting (ascending
  // slot order), and lays the plan out as the batch (invariant 1).
  void Plan(SlotTable& slots, std::span<const ShadowCandidate> shadows);
  // Decodes the batch. When the KV cells run out, `make_room` frees some (false: nothing
  // left to free) and `replan` plans again from what the sequences hold; the decode is
  // retried until it fits, no room is left, or nothing is left to decode (empty() then).
  // Errors: the decode's; kResourceExhausted when no room could be made.
  Status Decode(const std::function<bool()>& make_room, const std::function<void()>& replan);
  // The decode succeeded: each planned slot's sequence now holds what the plan carried.
  void AdvanceProgress(SlotTable& slots) const;
  // The slot's next token from its logits row. REQUIRES: slot.logits_index after a
  // successful decode (invariant 3).
  engine::Token Sample(Slot& slot) const { return slot.sampler->Sample(ctx_, *slot.logits_index); }

  bool empty() const { return batch_.empty(); }
  int n_tokens() const { return batch_.size(); }
  const BatchLimits& limits() const { return limits_; }
  void Clear() { batch_.Clear(); }

 private:
  engine::Context& ctx_;
  const BatchLimits limits_;
  BatchPlan plan_;      // what batch_ holds, per slot
  engine::Batch batch_;
};

}  // namespace hearth::server
