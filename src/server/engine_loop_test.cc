#include "server/engine_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "engine/chat_template.h"
#include "server/engine_loop_test_util.h"
#include "server/request_builder.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using std::chrono::milliseconds;

TEST_F(EngineLoopTest, ConcurrentTasksEachGetExactlyOneDone) {
  // Six tasks on four slots: two wait in the queue for a free slot.
  EngineLoop loop(*model_, Config(4));
  ASSERT_TRUE(loop.Start().ok());
  std::vector<GenerationTask> tasks;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) {
    tasks.push_back(Task(kPrompts[i], 6 + i));
    streams.push_back(Submit(loop, tasks.back()));
    ASSERT_NE(streams.back(), nullptr);
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(i);
    Outcome o = Drain(*streams[i]);
    EXPECT_EQ(o.n_terminal, 1);
    ExpectSaneUsage(o, tasks[i]);
  }
  loop.Stop();
  // Nothing follows the terminal event, not even after the loop has stopped.
  for (auto& s : streams) {
    StreamEvent ev;
    EXPECT_FALSE(s->Next(&ev, milliseconds(0)));
  }
  EngineStats st = loop.stats();
  EXPECT_EQ(st.requests_finished, 6);
  EXPECT_EQ(st.requests_failed, 0);
  EXPECT_EQ(st.requests_cancelled, 0);
  EXPECT_EQ(st.slots_busy, 0);
  EXPECT_EQ(st.queued, 0);
  int64_t prompt = 0;
  for (const auto& t : tasks) prompt += static_cast<int64_t>(t.prompt.size());
  EXPECT_EQ(st.prompt_tokens, prompt);
  EXPECT_GT(st.decode_calls, 0);
}

// Continuous batching must not change results: a greedy task says the same thing alone
// as it does decoded together with others, whether they start with it or join later.
// Each task generates only as far as its greedy choices are numerically clear.
TEST_F(EngineLoopTest, GreedyOutputIsTheSameAloneOrBatched) {
  constexpr int kN = 4;
  std::vector<GenerationTask> tasks;
  std::vector<std::string> alone;
  int n_compared = 0;
  for (int i = 0; i < kN; ++i) {
    tasks.push_back(Task(kPrompts[i], 16));
    tasks.back().max_tokens = std::max(1, testing::ClearGreedySteps(*model_, tasks.back().prompt, 16));
    n_compared += tasks.back().max_tokens;
    Outcome o = RunAlone(tasks.back());
    ASSERT_TRUE(o.done) << o.error.ToString();
    alone.push_back(o.completion.content);
  }
  // Enough tokens to mean something.
  ASSERT_GE(n_compared, 4 * kN);

  {  // All start together.
    EngineLoop loop(*model_, Config(kN));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : tasks) streams.push_back(Submit(loop, t));
    ASSERT_TRUE(loop.Start().ok());
    for (int i = 0; i < kN; ++i) {
      Outcome o = Drain(*streams[static_cast<size_t>(i)]);
      ASSERT_TRUE(o.done) << o.error.ToString();
      EXPECT_EQ(o.completion.content, alone[static_cast<size_t>(i)]) << "task " << i << " started together";
    }
  }
  {  // The others join while the first is decoding, and share its batches.
    EngineLoop loop(*model_, Config(kN));
    ASSERT_TRUE(loop.Start().ok());
    GenerationTask first_task = tasks[0];
    first_task.max_tokens = 16;  // still going when the others join
    auto first = Submit(loop, first_task);
    Outcome o0;
    ASSERT_TRUE(WaitForFirstDelta(*first, &o0));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 1; i < kN; ++i) streams.push_back(Submit(loop, tasks[static_cast<size_t>(i)]));
    AppendRest(*first, &o0);
    ASSERT_TRUE(o0.done) << o0.error.ToString();
    // It runs past its clear steps here, so only they are compared; a character the
    // shorter run cut in half was flushed as U+FFFD.
    std::string clear_part = alone[0];
    while (clear_part.ends_with("\xEF\xBF\xBD")) clear_part.resize(clear_part.size() - 3);
    EXPECT_TRUE(o0.completion.content.starts_with(clear_part)) << "task 0 joined by others";
    for (int i = 1; i < kN; ++i) {
      Outcome o = Drain(*streams[static_cast<size_t>(i - 1)]);
      ASSERT_TRUE(o.done) << o.error.ToString();
      EXPECT_EQ(o.completion.content, alone[static_cast<size_t>(i)]) << "task " << i << " joined late";
    }
  }
}

TEST_F(EngineLoopTest, CancelMidGenerationFinishesWithinAStep) {
  EngineLoop loop(*model_, Config(2));
  ASSERT_TRUE(loop.Start().ok());
  GenerationTask task = Task(kPrompts[0], 900);
  auto s = Submit(loop, task);
  Outcome o;
  ASSERT_TRUE(WaitForFirstDelta(*s, &o));
  s->Cancel();
  const int64_t steps_at_cancel = loop.stats().decode_calls;
  AppendRest(*s, &o);
  ASSERT_TRUE(o.done) << o.error.ToString();
  EXPECT_EQ(o.completion.finish_reason, api::FinishReason::kCancelled);
  EXPECT_LT(o.completion.usage.completion_tokens, task.max_tokens);
  EXPECT_EQ(o.Text(), o.completion.content);
  // The step running when Cancel came may finish, and one more may start before the flag
  // is seen; then the engine stops decoding it.
  EXPECT_LE(loop.stats().decode_calls - steps_at_cancel, 2);
  EXPECT_EQ(loop.stats().requests_cancelled, 1);

  // The slot is free again for the next request.
  GenerationTask next = Task(kPrompts[1], 3);
  auto s2 = Submit(loop, next);
  Outcome o2 = Drain(*s2);
  ExpectSaneUsage(o2, next);
}

TEST_F(EngineLoopTest, CancelWhileQueuedFinishesCancelled) {
  EngineLoop loop(*model_, Config(1));
  // Not started: both wait in the queue.
  auto a = Submit(loop, Task(kPrompts[0], 4));
  auto b = Submit(loop, Task(kPrompts[1], 4));
  b->Cancel();
  ASSERT_TRUE(loop.Start().ok());
  Outcome oa = Drain(*a);
  Outcome ob = Drain(*b);
  ASSERT_TRUE(oa.done);
  ASSERT_TRUE(ob.done) << ob.error.ToString();
  EXPECT_EQ(ob.completion.finish_reason, api::FinishReason::kCancelled);
  EXPECT_EQ(ob.completion.usage.completion_tokens, 0);
}

TEST_F(EngineLoopTest, FullQueueIsResourceExhausted) {
  EngineLoop loop(*model_, Config(1, 64, /*max_queued=*/2));
  // Before Start nothing drains the queue, so it fills deterministically.
  auto a = Submit(loop, Task(kPrompts[0], 2));
  auto b = Submit(loop, Task(kPrompts[1], 2));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(loop.stats().queued, 2);
  auto c = loop.Submit(Task(kPrompts[2], 2));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);

  // Once running, the queued ones are served.
  ASSERT_TRUE(loop.Start().ok());
  EXPECT_TRUE(Drain(*a).done);
  EXPECT_TRUE(Drain(*b).done);
  EXPECT_EQ(loop.stats().queued, 0);
}

TEST_F(EngineLoopTest, SubmitAfterStopIsUnavailable) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  loop.Stop();
  auto s = loop.Submit(Task(kPrompts[0], 2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
}

TEST_F(EngineLoopTest, StopFailsRequestsInFlightAndQueued) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  auto running = Submit(loop, Task(kPrompts[0], 900));
  Outcome o;
  ASSERT_TRUE(WaitForFirstDelta(*running, &o));
  auto queued = Submit(loop, Task(kPrompts[1], 4));
  loop.Stop();
  AppendRest(*running, &o);
  Outcome q = Drain(*queued);
  EXPECT_EQ(o.n_terminal, 1);
  EXPECT_EQ(q.n_terminal, 1);
  // The running one may have finished just before Stop; the queued one cannot have run.
  EXPECT_TRUE(o.done || o.error.code() == StatusCode::kUnavailable) << o.error.ToString();
  EXPECT_FALSE(q.done);
  EXPECT_EQ(q.error.code(), StatusCode::kUnavailable);
}

// A long prompt is prefilled in chunks over several steps, and a stream that is already
// generating keeps getting tokens in those same steps.
TEST_F(EngineLoopTest, LongPrefillInterleavesWithDecoding) {
  constexpr int kBatch = 32;
  EngineLoop loop(*model_, Config(2, kBatch));
  GenerationTask short_task = Task("Hello there, my friend.", 12);
  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "line " + std::to_string(i) + " of the long prompt. ";
  GenerationTask long_task = Task(long_text, 2);
  // More chunks than the short task has tokens to generate.
  ASSERT_GT(static_cast<int>(long_task.prompt.size()), (short_task.max_tokens + 2) * kBatch);
  // Queued before Start, so both are admitted in the same step: the short one in slot 0.
  auto s_short = Submit(loop, short_task);
  auto s_long = Submit(loop, long_task);
  ASSERT_TRUE(loop.Start().ok());
  Outcome a = Drain(*s_short);
  Outcome b = Drain(*s_long);
  ASSERT_TRUE(a.done) << a.error.ToString();
  ASSERT_TRUE(b.done) << b.error.ToString();
  EXPECT_EQ(a.completion.finish_reason, api::FinishReason::kLength);
  EXPECT_EQ(a.completion.usage.completion_tokens, short_task.max_tokens);
  ASSERT_FALSE(a.deltas.empty());
  // The short stream produced all its tokens, and finished, before the long prompt's
  // first token: its decoding ran in the steps that prefilled the long prompt.
  EXPECT_LT(a.terminal_order, b.FirstOrder());
  EXPECT_LT(a.deltas.back().order, b.FirstOrder());
}

TEST_F(EngineLoopTest, MaxTokensFinishesWithLength) {
  GenerationTask task = Task(kPrompts[2], 5);
  Outcome o = RunAlone(task);
  ExpectSaneUsage(o, task);
  EXPECT_EQ(o.completion.finish_reason, api::FinishReason::kLength);
  EXPECT_EQ(o.completion.usage.completion_tokens, 5);
}

// A substring of `text` starting and ending on UTF-8 character boundaries, from about a
// third of the way in.
std::string MiddlePiece(const std::string& text, size_t len) {
  auto is_boundary = [&](size_t i) {
    return i >= text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
  };
  size_t begin = text.size() / 3;
  while (begin < text.size() && !is_boundary(begin)) ++begin;
  size_t end = std::min(text.size(), begin + len);
  while (end < text.size() && !is_boundary(end)) ++end;
  return text.substr(begin, end - begin);
}

TEST_F(EngineLoopTest, StopStringEndsTheTextBeforeIt) {
  GenerationTask task = Task(kPrompts[3], 24);
  Outcome free_run = RunAlone(task);
  ASSERT_TRUE(free_run.done);
  const std::string text = free_run.completion.content;
  ASSERT_GE(text.size(), 6u) << "the model said too little to pick a stop string from";
  const std::string stop = MiddlePiece(text, 3);
  ASSERT_FALSE(stop.empty());
  const size_t at = text.find(stop);

  task.stop = {"never-appears-in-output-xyz", stop};
  Outcome o = RunAlone(task);
  ASSERT_TRUE(o.done) << o.error.ToString();
  EXPECT_EQ(o.completion.finish_reason, api::FinishReason::kStopSequence);
  EXPECT_EQ(o.completion.stop_sequence, stop);
  EXPECT_EQ(o.completion.content, text.substr(0, at));
  // Nothing of the stop string leaked into the stream.
  EXPECT_EQ(o.Text(), text.substr(0, at));
}

TEST_F(EngineLoopTest, PromptThatDoesNotFitIsAnError) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  GenerationTask too_long = Task("x", 4);
  too_long.prompt.assign(1024, too_long.prompt.back());
  GenerationTask empty = Task("x", 4);
  empty.prompt.clear();
  for (auto* t : {&too_long, &empty}) {
    auto s = Submit(loop, *t);
    Outcome o = Drain(*s);
    EXPECT_FALSE(o.done);
    EXPECT_EQ(o.error.code(), StatusCode::kOutOfRange);
  }
  // The loop is still serving.
  GenerationTask ok = Task(kPrompts[0], 2);
  Outcome o = Drain(*Submit(loop, ok));
  ExpectSaneUsage(o, ok);
}

}  // namespace
}  // namespace hearth::server
