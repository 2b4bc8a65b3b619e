#include "server/task_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace hearth::server {
namespace {

QueuedTask Task(std::vector<engine::Token> prompt, bool background = false, std::string ns = "m") {
  QueuedTask q;
  q.task.prompt = std::move(prompt);
  q.task.background = background;
  q.task.cache_namespace = std::move(ns);
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
  EXPECT_EQ(q.Pop(false)->task.prompt, std::vector<engine::Token>{0});
  EXPECT_EQ(q.Pop(false)->task.prompt, std::vector<engine::Token>{1});
}

TEST(TaskQueueTest, BackgroundQueuePushesItsOldestOutAndEndsIt) {
  TaskQueue q(/*max_queued=*/1);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i <= static_cast<int>(TaskQueue::kMaxBackground); ++i) {
    QueuedTask t = Task({i}, /*background=*/true);
    streams.push_back(t.stream);
    EXPECT_TRUE(q.Push(std::move(t)).ok());
  }
  EXPECT_TRUE(EndedDone(*streams[0]));
  EXPECT_FALSE(EndedDone(*streams[1]));
  EXPECT_FALSE(q.HasRequests());
  EXPECT_EQ(q.Pop(true)->task.prompt, std::vector<engine::Token>{1});
  EXPECT_FALSE(q.Pop(false).has_value());
}

TEST(TaskQueueTest, DropsStaleBackgroundTasksWithADoneEvent) {
  TaskQueue q(4);
  QueuedTask a = Task({1, 2}, true), b = Task({7}, true);
  auto sa = a.stream, sb = b.stream;
  ASSERT_TRUE(q.Push(std::move(a)).ok());
  ASSERT_TRUE(q.Push(std::move(b)).ok());
  EXPECT_EQ(q.DropBackground([](const GenerationTask& t) { return t.prompt.front() == 1; }), 1);
  EXPECT_TRUE(EndedDone(*sa));
  EXPECT_FALSE(EndedDone(*sb));
  EXPECT_EQ(q.Pop(true)->task.prompt, std::vector<engine::Token>{7});
}

TEST(TaskQueueTest, SharedPrefixCountsOnlyRequestsInTheNamespace) {
  TaskQueue q(4);
  ASSERT_TRUE(q.Push(Task({1, 2, 3, 9})).ok());
  ASSERT_TRUE(q.Push(Task({1, 2, 3, 4, 5}, false, "other")).ok());
  ASSERT_TRUE(q.Push(Task({1, 2, 3, 4, 5, 6}, /*background=*/true)).ok());
  const std::vector<engine::Token> t = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(q.RequestsSharedPrefix("m", t), 3u);
}

TEST(TaskQueueTest, StopRefusesNewTasksWakesTheWaiterAndHandsBackTheRest) {
  TaskQueue q(4);
  ASSERT_TRUE(q.Push(Task({1}, true)).ok());
  ASSERT_TRUE(q.Push(Task({2})).ok());
  ASSERT_TRUE(q.Pop(false).has_value());
  ASSERT_TRUE(q.Pop(true).has_value());
  std::thread waiter([&] { q.WaitForTask(std::nullopt); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(q.Push(Task({3})).ok());
  q.PushFront(Task({4}, true));
  waiter.join();  // woke for the task; hangs here if Push does not wake it
  q.Stop();
  EXPECT_TRUE(q.stopped());
  q.WaitForTask(std::nullopt);  // returns at once once stopped
  EXPECT_EQ(q.Push(Task({5})).code(), StatusCode::kUnavailable);
  const std::vector<QueuedTask> rest = q.TakeAll();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].task.prompt, std::vector<engine::Token>{3});  // requests first
  EXPECT_EQ(rest[1].task.prompt, std::vector<engine::Token>{4});
  EXPECT_FALSE(q.HasRequests());
}

}  // namespace
}  // namespace hearth::server
