// SnapshotPolicy: where in a token sequence states are kept, and when. Every position a
// request, a shadow or a warm-ahead task keeps a state at is decided here; the callers
// only say what they know about the sequence (its message boundaries, where generation
// starts, where a cut-off reply's content ends) and take the positions it returns.
//
// The policy is pure: no model, no tree, no state. It knows the shape of a chat prompt in
// tokens (turns opened by a marker, a generation prompt after the last one, a reply after
// that) but nothing of how those are found (server/request_builder.h does that) nor of
// what a state costs in a tier (prefix_cache.h).
//
// Thread safety: every function is a pure function of its arguments; call from any thread.
//
// Invariants (snapshot_policy_test.cc pins each down):
//  1. Every list of positions it returns is ascending without repeats, except the shared
//     tier's candidates, which are deepest first.
//  2. A request keeps a state at its generation start and at its prompt's end, always;
//     those two are the only positions whose state waits for the first token (the prompt
//     end's) or goes to the shared tier whole (the generation start's).
//  3. A message end within kHeaderTokens before the generation start is not kept (the
//     generation start serves it), unless the next request resumes from that very end
//     (after tool results in a template whose history continues the calling turn) or the
//     generation start is the prompt's end.
//  4. A cut-off reply keeps the kCutOffStates positions before its content's end and the
//     end itself (never position 0), and warm-ahead of it resumes no deeper than the first
//     of them, so each is computed and kept even when a deeper state exists.
//  5. A device sequence made redundant by a newer one on its path leaves a partial state
//     only when the model needs one and its position holds no serialized state yet.
//  6. A request's prefill keeps a state past where it resumed only at least the engine's
//     efficient batch floor after the last one, except those of invariants 2 and 3 and
//     clients' breakpoints, which it always keeps.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace hearth::cache {

class SnapshotPolicy {
 public:
  // Tokens of a turn's header ("<|im_start|>user\n"): a message end this close before
  // the generation start is served by it, and a shadow stops this far past a boundary.
  static constexpr int32_t kHeaderTokens = 4;
  // Positions kept before a cut-off reply's content end: the client may have read a
  // piece or two less than was delivered.
  static constexpr int32_t kCutOffStates = 8;
  // The most positions the shared tier is asked about for one prompt.
  static constexpr size_t kSharedCandidates = 64;

  // What a request's prompt looks like to the policy. Positions are prompt indices.
  struct Prompt {
    int32_t n_tokens = 0;
    std::span<const int32_t> message_ends;  // where each turn marker but the first sits, ascending
    int32_t generation_start = 0;           // where re-rendered history stops repeating the prompt
    // The next request resumes from the last message's end, not the generation start:
    // tool results in a template whose history continues the calling turn.
    bool resumes_at_last_end = false;
  };
  // The positions a request keeps states at (invariants 1-3). A raw prompt (no turns) is
  // {n_tokens, 0 message ends, generation_start n_tokens}: its end only.
  static std::vector<int32_t> RequestPositions(const Prompt& prompt);
  // Where a request's prefill, resumed at `resumed`, stops to keep a state (invariant 6):
  // `positions` (those up to `resumed` too: their states are there already), less each
  // one past `resumed` fewer than `floor` tokens after the last stop (or `resumed`). A
  // state exists only at a decode's end, and where a decode of fewer than `floor` tokens
  // costs several times more a token (ggml's CPU flash attention takes its tiled path from
  // 64 query tokens on; at 12k tokens of context a 63-token decode runs at a quarter of a
  // 64-token one's speed, and the gap grows with the context) such a state costs more now
  // than it could save later: a request parting there would resume fewer than `floor`
  // tokens earlier. A stop far enough after the last stays even where the decode after it
  // is short: it may save much (a system prompt another conversation begins with). Always
  // kept: `kept` (the generation start, the prompt's end, clients' breakpoints) and a
  // message end within kHeaderTokens before `generation_start` (invariant 3 kept it for the
  // next request). floor <= 1 keeps every position. REQUIRES: positions ascending.
  static std::vector<int32_t> PrefillStops(std::span<const int32_t> positions, int32_t resumed, int32_t floor,
                                           int32_t generation_start, std::span<const int32_t> kept);
  // `positions` with `at` added (where --stabilize moved spans out of the last message:
  // the next request shares the prompt only up to there). REQUIRES: positions ascending.
  static void AddPosition(std::vector<int32_t>& positions, int32_t at);
  // The position whose state serves a resume at message end `message_end`: the generation
  // start when the end lies within kHeaderTokens before it (invariant 3), else the end.
  static int32_t ServingPosition(int32_t message_end, int32_t generation_start);

  // Whether a request's state at `at` waits until its first token is out: its prompt's
  // end (nothing needs it before; each costs a state copy). Background work never waits.
  static bool WaitsForFirstToken(int32_t at, int32_t n_prompt, bool background);
  // Whether a request's state at `at` also goes to the shared tier whole: its generation
  // start, where a client that sends back another reply than the generated one resumes.
  static bool SharesWhole(int32_t at, int32_t generation_start, bool background);

  // Where another replica may have kept a state of a prompt whose own positions are
  // `positions`: each, and each up to kHeaderTokens past it (a shadow ends after the next
  // turn's header), and `max_reuse` itself; those in (0, max_reuse], deepest first, at
  // most kSharedCandidates.
  static std::vector<int32_t> SharedCandidates(std::span<const int32_t> positions, int32_t max_reuse);

  // A shadow holding `held` tokens of its target keeps a state there when `held` is one
  // of the target's message ends.
  static bool ShadowKeepsStateAt(std::span<const int32_t> message_ends, int32_t held);
  // The states a finishing shadow keeps on its way from `done` to `end` (the drain's
  // end): the target's message ends past `done`, `end` itself, and for a cut-off reply
  // whose content ends at `cut_content_end`, the positions of invariant 4 past `done`.
  static std::vector<int32_t> ShadowDrainStates(std::span<const int32_t> message_ends, int32_t done, int32_t end,
                                                std::optional<int32_t> cut_content_end);
  // The first position a cut-off reply whose content ends at `content_end` (> 0) keeps a
  // state at (invariant 4): at least 1.
  static int32_t FirstCutOffState(int32_t content_end);

  // What a warm-ahead task (a prefill of the next request's prompt up to where the next
  // message begins, `common`) keeps and how deep it may resume.
  struct WarmAhead {
    std::vector<int32_t> positions;
    std::optional<int32_t> max_resume;  // set for a cut-off reply (invariant 4)
  };
  // `next_positions`: RequestPositions of the next request's rendered prompt;
  // `cut_content_end`: where a cut-off reply's content ends in that prompt. Keeps those
  // of `next_positions` before `common`, `common`, and the cut-off positions.
  static WarmAhead WarmAheadPositions(std::span<const int32_t> next_positions, int32_t common,
                                      std::optional<int32_t> cut_content_end);

  // Where the part of an adopted sequence that is not worth a copy of its own begins: a
  // request's generated reply, from its shadow's fork (warm-ahead renders the same), which
  // costs at most its length to compute again and which the next request rarely carries
  // as generated. 0 for background work: everything it holds is worth keeping.
  static int32_t AdoptedTailStart(bool background, int32_t shadow_fork);
  // Whether a device sequence made redundant by a newer one on its path leaves a partial
  // state at its position (invariant 5).
  static bool KeepsPartialOfRedundant(bool needs_partial, bool has_serialized_state);
};

}  // namespace hearth::cache
