// ClientPause: how long a namespace's clients leave between a reply and the next request
// of its conversation that adds a user message, and how fast the engine prefills in the
// background meanwhile. From both, whether the pause before a user turn is known to hold a
// given amount of warm-ahead prefill (at the speed of the engine's recent prefill steps). ShadowFeed::kPaced asks that before feeding a shadow's
// tiles beside a decode: where the pause holds them, the reply decodes alone and warm-ahead
// feeds them after it (a person reading); where it does not (a client that answers at once),
// they go beside the decode as with kAfterReply.
//
// A request is the next turn of a recorded reply when its prompt begins with that reply's
// conversation up to the fork (WarmAheadTask::fork): it came after that reply, carrying it
// or another in its place.
//
// Threads: any. One lock, held only for a record or a lookup.
//
// Invariants:
//  1. Nothing is assumed before it is seen: HoldsPrefill is false until the namespace has
//     kPausesKept pauses and the engine at least one prefill step's speed.
//  2. A recorded reply gives at most one pause: the first request past it takes it.
//  3. Memory is bounded: kRepliesKept replies (a hash of their conversations, not the
//     tokens), kPausesKept pauses for each of at most kNamespacesKept namespaces.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "engine/types.h"

namespace hearth::server {

class ClientPause {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kRepliesKept = 64;
  static constexpr size_t kPausesKept = 2;
  static constexpr size_t kNamespacesKept = 256;
  static constexpr size_t kSpeedsKept = 8;
  // What the estimate of the prefill's duration is multiplied by, and what is added: a
  // 64-token step costs more per token than the longer steps the speed may come from.
  static constexpr double kMargin = 1.5;
  static constexpr std::chrono::milliseconds kSlack{300};

  // A reply of the conversation `prompt[0, fork)` ended at `at` (warm-ahead's task for its
  // next turn was planned). REQUIRES: fork <= prompt.size(); fork 0 records nothing.
  void ReplyEnded(const std::string& ns, std::span<const engine::Token> prompt, size_t fork, Clock::time_point at);
  // A request arrived at `at`. When it is the next turn of a recorded reply (it begins
  // with that reply's conversation) and adds a user message, the time since that reply is
  // a pause of `ns`; either way the reply is forgotten.
  void RequestArrived(const std::string& ns, std::span<const engine::Token> prompt, bool adds_user_message,
                      Clock::time_point at);
  // A decode of `n_tokens` prompt tokens with no reply's token in it took `took`.
  void PrefillStep(int n_tokens, Clock::duration took);

  // Whether the shortest of `ns`'s last kPausesKept pauses is longer than prefilling
  // `n_tokens` is expected to take (the slowest of the last kSpeedsKept prefill steps,
  // per token; kMargin, kSlack). False while
  // either is unknown (invariant 1).
  bool HoldsPrefill(const std::string& ns, int n_tokens) const;

 private:
  struct Reply {
    std::string ns;
    size_t fork = 0;
    uint64_t hash = 0;  // of prompt[0, fork)
    Clock::time_point at;
  };
  mutable std::mutex mu_;
  std::deque<Reply> replies_;                            // guarded by mu_; oldest first
  std::map<std::string, std::deque<Clock::duration>> pauses_;  // guarded by mu_; newest last
  std::deque<double> ms_per_token_;                      // guarded by mu_; newest last
};

}  // namespace hearth::server
