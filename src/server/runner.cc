#include "server/runner.h"

namespace hearth::server {
namespace {

BatchCandidate CandidateOf(const Slot& slot, size_t index, const engine::Context& ctx) {
  BatchCandidate c{.slot = index, .seq = slot.lease.seq(), .n_past = ctx.SeqLength(slot.lease.seq()),
                   .pending = slot.pending, .prompt = slot.task.prompt, .n_prompt_done = slot.n_prompt_done,
                   .background = slot.background()};
  const auto& snaps = slot.task.snapshot_positions;
  if (slot.next_snapshot < snaps.size()) c.next_snapshot = static_cast<size_t>(snaps[slot.next_snapshot]);
  return c;
}

}  // namespace

void Runner::Plan(SlotTable& slots, std::span<const ShadowCandidate> shadows) {
  std::vector<BatchCandidate> candidates;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i]) candidates.push_back(CandidateOf(*slots[i], i, ctx_));
  }
  plan_ = PlanBatch(candidates, shadows, limits_);
  batch_.Clear();
  for (const PlannedToken& t : plan_.tokens) batch_.Add(t.token, t.pos, t.seq, t.logits);
  for (const SlotPlan& sp : plan_.slots) {
    slots[sp.slot]->in_batch = sp.in_batch;
    slots[sp.slot]->logits_index = sp.logits_index;
  }
  for (size_t k = 0; k < shadows.size(); ++k) slots[shadows[k].slot]->shadow->n_in_batch = plan_.shadow_tokens[k];
}

// A failed decode leaves the memory as it was, and progress moves only after a decode
// succeeds: each retry plans again from what the sequences hold.
Status Runner::Decode(const std::function<bool()>& make_room, const std::function<void()>& replan) {
  Status s = ctx_.Decode(batch_);
  while (s.code() == StatusCode::kResourceExhausted) {
    if (!make_room()) break;
    replan();
    if (batch_.empty()) return Status::Ok();
    s = ctx_.Decode(batch_);
  }
  return s;
}

void Runner::AdvanceProgress(SlotTable& slots) const {
  for (const SlotPlan& sp : plan_.slots) {
    if (slots[sp.slot]) slots[sp.slot]->n_prompt_done = sp.n_prompt_done_after;
  }
}

}  // namespace hearth::server
