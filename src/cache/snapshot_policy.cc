#include "cache/snapshot_policy.h"

#include <algorithm>

namespace hearth::cache {
namespace {

void SortUnique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::vector<int32_t> SnapshotPolicy::RequestPositions(const Prompt& prompt) {
  std::vector<int32_t> out(prompt.message_ends.begin(), prompt.message_ends.end());
  // The last message's end sits just before the generation prompt's own header: nothing
  // but an assistant turn follows it in practice, and the generation start serves that.
  // Each position splits the prefill in two decodes (a state exists only at a decode's
  // end), and each decode reads all the weights once: dropping it saves one. Not where
  // the next request resumes from that end; nor where the generation start is the
  // prompt's end (history repeats the whole generation prompt: Granite 4.0, Qwen3
  // thinking): the same prompt sent again (a retry, a regenerated reply) must resume
  // before its last token, and would otherwise recompute the whole last message.
  const int32_t start = prompt.generation_start;
  const bool keep_last_end = prompt.resumes_at_last_end || start == prompt.n_tokens;
  std::erase_if(out, [&](int32_t p) { return !keep_last_end && p < start && start - p <= kHeaderTokens; });
  out.push_back(start);
  out.push_back(prompt.n_tokens);
  SortUnique(out);
  return out;
}

std::vector<int32_t> SnapshotPolicy::PrefillStops(std::span<const int32_t> positions, int32_t resumed, int32_t floor,
                                                  int32_t generation_start, std::span<const int32_t> kept) {
  std::vector<int32_t> out;
  int32_t last = resumed;
  for (int32_t p : positions) {
    // A message end the generation start serves is in `positions` only where invariant 3
    // kept it for the next request.
    const bool always = p <= resumed || std::find(kept.begin(), kept.end(), p) != kept.end() ||
                        ServingPosition(p, generation_start) != p;
    if (!always && p - last < floor) continue;
    out.push_back(p);
    last = std::max(last, p);
  }
  return out;
}

void SnapshotPolicy::AddPosition(std::vector<int32_t>& positions, int32_t at) {
  positions.insert(std::lower_bound(positions.begin(), positions.end(), at), at);
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
}

int32_t SnapshotPolicy::ServingPosition(int32_t message_end, int32_t generation_start) {
  if (generation_start >= message_end && generation_start - message_end <= kHeaderTokens) return generation_start;
  return message_end;
}

bool SnapshotPolicy::WaitsForFirstToken(int32_t at, int32_t n_prompt, bool background) {
  return !background && at == n_prompt;
}

bool SnapshotPolicy::SharesWhole(int32_t at, int32_t generation_start, bool background) {
  return !background && at == generation_start;
}

std::vector<int32_t> SnapshotPolicy::SharedCandidates(std::span<const int32_t> positions, int32_t max_reuse) {
  std::vector<int32_t> out = {max_reuse};
  for (int32_t p : positions) {
    for (int32_t k = 0; k <= kHeaderTokens; ++k) out.push_back(p + k);
  }
  std::sort(out.rbegin(), out.rend());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  std::erase_if(out, [&](int32_t p) { return p > max_reuse || p <= 0; });
  if (out.size() > kSharedCandidates) out.resize(kSharedCandidates);
  return out;
}

bool SnapshotPolicy::ShadowKeepsStateAt(std::span<const int32_t> message_ends, int32_t held) {
  return std::binary_search(message_ends.begin(), message_ends.end(), held);
}

std::vector<int32_t> SnapshotPolicy::ShadowDrainStates(std::span<const int32_t> message_ends, int32_t done,
                                                       int32_t end, std::optional<int32_t> cut_content_end) {
  std::vector<int32_t> out;
  if (cut_content_end) {
    for (int32_t p = FirstCutOffState(*cut_content_end); p <= *cut_content_end; ++p) {
      if (p > done) out.push_back(p);
    }
  }
  for (int32_t p : message_ends) {
    if (p > done) out.push_back(p);
  }
  out.push_back(end);
  SortUnique(out);
  return out;
}

int32_t SnapshotPolicy::FirstCutOffState(int32_t content_end) { return std::max<int32_t>(1, content_end - kCutOffStates); }

SnapshotPolicy::WarmAhead SnapshotPolicy::WarmAheadPositions(std::span<const int32_t> next_positions, int32_t common,
                                                             std::optional<int32_t> cut_content_end) {
  WarmAhead out;
  for (int32_t p : next_positions) {
    if (p < common) out.positions.push_back(p);
  }
  out.positions.push_back(common);
  if (cut_content_end) {
    const int32_t first = FirstCutOffState(*cut_content_end);
    for (int32_t p = first; p <= *cut_content_end; ++p) out.positions.push_back(p);
    out.max_resume = first;
  }
  SortUnique(out.positions);
  return out;
}

int32_t SnapshotPolicy::AdoptedTailStart(bool background, int32_t shadow_fork) {
  return background ? 0 : std::max(0, shadow_fork);
}

bool SnapshotPolicy::KeepsPartialOfRedundant(bool needs_partial, bool has_serialized_state) {
  return needs_partial && !has_serialized_state;
}

}  // namespace hearth::cache
