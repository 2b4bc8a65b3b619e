// RequestStream: the one-way channel from the engine loop to the HTTP thread serving one
// request, plus the cancel flag going the other way.
//
// Threads: exactly one producer (the engine loop) calls Push*; exactly one consumer (the
// HTTP handler) calls Next and Cancel. Both hold a shared_ptr, so either side may go away
// first.
//
// Invariants:
//  1. After a kDone or kError event nothing more is pushed.
//  2. At most one kAdmitted, and only before any kDelta: it says what the prompt reused
//     when the engine first admitted the request (a request requeued and admitted again
//     keeps its first), so a stream can report the cache before the prefill.
//  3. Cancel() is sticky; the engine sees it at its next step and finishes the request
//     with FinishReason::kCancelled, keeping what was computed.
//  4. StreamEvent::order increases with every push in the process, across all streams:
//     with one producer thread it is the order the engine emitted events in.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "api/types.h"
#include "base/status.h"

namespace hearth::server {

struct StreamEvent {
  enum class Kind { kAdmitted, kDelta, kDone, kError };
  Kind kind = Kind::kDelta;
  api::Usage admitted;         // kAdmitted: prompt_tokens, cached_tokens and the cache report
  api::Delta delta;            // kDelta
  api::Completion completion;  // kDone: the whole response, with usage
  Status error;                // kError
  uint64_t order = 0;          // set by Push; see invariant 3
};

class RequestStream {
 public:
  // Producer side.
  void PushAdmitted(api::Usage usage);  // ignored after the first, or after a delta
  void PushDelta(api::Delta delta);
  void PushDone(api::Completion completion);
  void PushError(Status error);

  // Consumer side. Waits up to `timeout` for the next event; false on timeout.
  bool Next(StreamEvent* event, std::chrono::milliseconds timeout);
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  // Cancels, recording what the client actually received: the reply it will send back
  // in its next request, which warm-ahead prepares instead of everything generated.
  void CancelDelivered(api::Completion delivered);

  // Either side.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // What CancelDelivered recorded, if anything. Read after cancelled() is true.
  std::optional<api::Completion> delivered() const;

 private:
  void Push(StreamEvent event);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;  // guarded by mu_
  bool closed_ = false;             // guarded by mu_
  bool admitted_or_begun_ = false;  // guarded by mu_: a kAdmitted or kDelta was pushed
  std::atomic<bool> cancelled_{false};
  mutable std::mutex delivered_mu_;
  std::optional<api::Completion> delivered_;  // guarded by delivered_mu_
};

}  // namespace hearth::server
