#include "server/task_queue.h"

#include <algorithm>

namespace hearth::server {

Status TaskQueue::Push(QueuedTask q) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    if (static_cast<int>(requests_.size()) >= max_queued_) {
      return ResourceExhausted("the server is busy: " + std::to_string(requests_.size()) +
                               " requests are already waiting; retry later");
    }
    requests_.push_back(std::move(q));
  }
  cv_.notify_one();
  return Status::Ok();
}

Status TaskQueue::Push(QueuedWarmAhead q) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    if (background_.size() >= kMaxBackground) {
      background_.front().stream->PushDone({});  // dropped unrun: the oldest is the stalest
      background_.pop_front();
    }
    background_.push_back(std::move(q));
  }
  cv_.notify_one();
  return Status::Ok();
}

void TaskQueue::PushFront(QueuedTask q) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.push_front(std::move(q));
}

void TaskQueue::PushFront(QueuedWarmAhead q) {
  std::lock_guard<std::mutex> lock(mu_);
  background_.push_front(std::move(q));
}

namespace {

template <typename T>
std::optional<T> PopFront(std::deque<T>& queue) {
  if (queue.empty()) return std::nullopt;
  T q = std::move(queue.front());
  queue.pop_front();
  return q;
}

}  // namespace

std::optional<QueuedTask> TaskQueue::PopRequest() {
  std::lock_guard<std::mutex> lock(mu_);
  return PopFront(requests_);
}

std::optional<QueuedWarmAhead> TaskQueue::PopWarmAhead() {
  std::lock_guard<std::mutex> lock(mu_);
  return PopFront(background_);
}

bool TaskQueue::HasRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !requests_.empty();
}

int TaskQueue::n_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(requests_.size());
}

size_t TaskQueue::RequestsSharedPrefix(const std::string& ns, std::span<const engine::Token> tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t longest = 0;
  for (const auto& q : requests_) {
    if (q.task.cache_namespace == ns) longest = std::max(longest, engine::CommonPrefix(q.task.prompt, tokens));
  }
  return longest;
}

int64_t TaskQueue::DropBackground(const std::function<bool(const WarmAheadTask&)>& stale) {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(std::erase_if(background_, [&](const QueuedWarmAhead& q) {
    if (!stale(q.task)) return false;
    q.stream->PushDone({});
    return true;
  }));
}

void TaskQueue::WaitForTask(std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto has_task = [this] { return HasTaskLocked(); };
  if (deadline) {
    cv_.wait_until(lock, *deadline, has_task);
  } else {
    cv_.wait(lock, has_task);
  }
}

void TaskQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

bool TaskQueue::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

TaskQueue::Waiting TaskQueue::TakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  Waiting all;
  for (auto& q : requests_) all.requests.push_back(std::move(q));
  for (auto& q : background_) all.warm_ahead.push_back(std::move(q));
  requests_.clear();
  background_.clear();
  return all;
}

}  // namespace hearth::server
