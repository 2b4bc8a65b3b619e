#include "server/task_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace hearth::server {
namespace {

QueuedTask Task(std::vector<engine::Token> prompt, std::string ns = "m") {
  QueuedTask q;
  q.task.prompt = std::move(prompt);
  q.task.cache_namespace = std::move(ns);
  q.stream = std::make_shared<RequestStream>();
  return q;
}

QueuedWarmAhead WarmAhead(std::vector<engine::Token> prompt) {
  QueuedWarmAhead q;
  q.task.prompt = std::move(prompt);
  q.task.cache_namespace = "m";
  q.stream = std::make_shared<RequestStream>();
  return q;
}

// Whether the stream ended with kDone (and nothing else came).
bool EndedDone(RequestStream& s) {
  StreamEvent e;
  return s.Next(&e, std::chrono::milliseconds(0)) && e.kind == StreamEvent::Kind::kDone;
}

TEST(TaskQueueTest, RefusesRequestsPastMaxQueuedButNotOnesPutBack) {
  TaskQueue q(/*max_queued=*/2);
  EXPECT_TRUE(q.Push(Task({1})).ok());
  EXPECT_TRUE(q.Push(Task({2})).ok());
  const Status full = q.Push(Task({3}));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(q.n_requests(), 2);
  q.PushFront(Task({0}));  // a requeued prefill is never refused
  EXPECT_EQ(q.n_requests(), 3);
  EXPECT_EQ(q.PopRequest()->task.prompt, std::vector<engine::Token>{0});
  EXPECT_EQ(q.PopRequest()->task.prompt, std::vector<engine::Token>{1});
}

TEST(TaskQueueTest, BackgroundQueuePushesItsOldestOutAndEndsIt) {
  TaskQueue q(/*max_queued=*/1);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i <= static_cast<int>(TaskQueue::kMaxBackground); ++i) {
    QueuedWarmAhead t = WarmAhead({i});
    streams.push_back(t.stream);
    EXPECT_TRUE(q.Push(std::move(t)).ok());
  }
  EXPECT_TRUE(EndedDone(*streams[0]));
  EXPECT_FALSE(EndedDone(*streams[1]));
  EXPECT_FALSE(q.HasRequests());
  EXPECT_EQ(q.PopWarmAhead()->task.prompt, std::vector<engine::Token>{1});
  EXPECT_FALSE(q.PopRequest().has_value());
}

TEST(TaskQueueTest, DropsStaleBackgroundTasksWithADoneEvent) {
  TaskQueue q(4);
  QueuedWarmAhead a = WarmAhead({1, 2}), b = WarmAhead({7});
  auto sa = a.stream, sb = b.stream;
  ASSERT_TRUE(q.Push(std::move(a)).ok());
  ASSERT_TRUE(q.Push(std::move(b)).ok());
  EXPECT_EQ(q.DropBackground([](const WarmAheadTask& t) { return t.prompt.front() == 1; }), 1);
  EXPECT_TRUE(EndedDone(*sa));
  EXPECT_FALSE(EndedDone(*sb));
  EXPECT_EQ(q.PopWarmAhead()->task.prompt, std::vector<engine::Token>{7});
}

TEST(TaskQueueTest, SharedPrefixCountsOnlyRequestsInTheNamespace) {
  TaskQueue q(4);
  ASSERT_TRUE(q.Push(Task({1, 2, 3, 9})).ok());
  ASSERT_TRUE(q.Push(Task({1, 2, 3, 4, 5}, "other")).ok());
  ASSERT_TRUE(q.Push(WarmAhead({1, 2, 3, 4, 5, 6})).ok());
  const std::vector<engine::Token> t = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(q.RequestsSharedPrefix("m", t), 3u);
}

TEST(TaskQueueTest, StopRefusesNewTasksWakesTheWaiterAndHandsBackTheRest) {
  TaskQueue q(4);
  ASSERT_TRUE(q.Push(WarmAhead({1})).ok());
  ASSERT_TRUE(q.Push(Task({2})).ok());
  ASSERT_TRUE(q.PopRequest().has_value());
  ASSERT_TRUE(q.PopWarmAhead().has_value());
  std::thread waiter([&] { q.WaitForTask(std::nullopt); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(q.Push(Task({3})).ok());
  q.PushFront(WarmAhead({4}));
  waiter.join();  // woke for the task; hangs here if Push does not wake it
  q.Stop();
  EXPECT_TRUE(q.stopped());
  q.WaitForTask(std::nullopt);  // returns at once once stopped
  EXPECT_EQ(q.Push(Task({5})).code(), StatusCode::kUnavailable);
  const TaskQueue::Waiting rest = q.TakeAll();
  ASSERT_EQ(rest.requests.size() + rest.warm_ahead.size(), 2u);
  EXPECT_EQ(rest.requests[0].task.prompt, std::vector<engine::Token>{3});
  EXPECT_EQ(rest.warm_ahead[0].task.prompt, std::vector<engine::Token>{4});
  EXPECT_FALSE(q.HasRequests());
}

}  // namespace
}  // namespace hearth::server
