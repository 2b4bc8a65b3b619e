// TaskQueue: the engine's two wait queues, requests and background (warm-ahead) tasks,
// between the HTTP threads that submit and the engine thread that admits. It decides who
// waits and who is refused; the engine loop decides who runs.
//
// Threads: every method may be called from any thread; one mutex guards everything, and
// nothing else (the engine's stats have their own).
//
// Invariants:
//  1. The request queue never holds more than max_queued tasks: Push refuses the rest
//     (kResourceExhausted). Tasks put back (PushFront) are not refused.
//  2. The background queue never holds more than kMaxBackground tasks: a new one pushes
//     the oldest (the stalest) out, and that one ends at once (kDone, no output).
//  3. Once stopped, Push refuses every task (kUnavailable), WaitForTask returns at once,
//     and TakeAll hands back whatever still waits, for the engine to answer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/prefix_cache.h"
#include "server/request_stream.h"
#include "server/task.h"

namespace hearth::server {

struct QueuedTask {
  GenerationTask task;
  std::shared_ptr<RequestStream> stream;
  // A prefill put back for KV room: what its first admission found in the cache. Its
  // own progress, which it resumes from, is not reuse.
  std::optional<cache::ResumeReport> first_resume;
};

struct QueuedWarmAhead {
  WarmAheadTask task;
  std::shared_ptr<RequestStream> stream;
};

class TaskQueue {
 public:
  static constexpr size_t kMaxBackground = 4;

  explicit TaskQueue(int max_queued) : max_queued_(max_queued) {}

  // Queues a request, or a warm-ahead task, at the back of its queue. Errors:
  // kUnavailable once stopped; kResourceExhausted when the request queue is full.
  Status Push(QueuedTask q);
  Status Push(QueuedWarmAhead q);
  // Puts a task back at the front of its queue: one whose admission found no sequence,
  // or a prefill requeued for KV room. Never refused.
  void PushFront(QueuedTask q);
  void PushFront(QueuedWarmAhead q);
  // The front task of the request queue, or of the background queue; nullopt when empty.
  std::optional<QueuedTask> PopRequest();
  std::optional<QueuedWarmAhead> PopWarmAhead();

  bool HasRequests() const;  // a request waits
  int n_requests() const;
  // The longest prefix of `tokens` that a waiting request's prompt in `ns` begins with.
  size_t RequestsSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const;
  // Ends (kDone, no output) and removes the background tasks `stale` picks. Returns how
  // many.
  int64_t DropBackground(const std::function<bool(const WarmAheadTask&)>& stale);

  // Waits until a task is queued or the queue stops, no longer than `deadline` when one
  // is given.
  void WaitForTask(std::optional<std::chrono::steady_clock::time_point> deadline);
  void Stop();
  bool stopped() const;
  // Every waiting task, each queue in order; the queues are empty after.
  struct Waiting {
    std::vector<QueuedTask> requests;
    std::vector<QueuedWarmAhead> warm_ahead;
  };
  Waiting TakeAll();

 private:
  bool HasTaskLocked() const { return stopping_ || !requests_.empty() || !background_.empty(); }

  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedTask> requests_;    // guarded by mu_
  std::deque<QueuedWarmAhead> background_;  // guarded by mu_
  bool stopping_ = false;              // guarded by mu_
};

}  // namespace hearth::server
