// EngineLoop when the KV cells run out: room found, prefills requeued, requests paused.
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

// Finished requests keep their KV cells for the prefix cache; a new prompt that needs the
// room gets it (idle cached sequences move to RAM).
TEST_F(EngineLoopTest, SequentialLongPromptsFindKvRoom) {
  EngineLoop loop(*model_, Config(2));
  ASSERT_TRUE(loop.Start().ok());
  for (const char* tag : {"a", "b", "c"}) {
    GenerationTask t = Task(LongText(tag, 150), 4);  // ~600 of 1024 cells each
    ASSERT_LT(static_cast<int>(t.prompt.size()) + t.max_tokens, 1024);
    Outcome o = Drain(*Submit(loop, t));
    EXPECT_TRUE(o.done) << tag << ": " << o.error.ToString();
  }
}

// All sequences share n_ctx KV cells. Of two generating requests that fit alone but not
// together (idle cached sequences evicted first), the younger pauses (its state goes to
// the cache) and resumes when the older one is done: both finish.
TEST_F(EngineLoopTest, RequestsThatFitAloneButNotTogetherBothFinish) {
  EngineLoop loop(*model_, Config(2));
  GenerationTask a = Task(LongText("a", 110), 300);
  GenerationTask b = Task(LongText("b", 110), 300);
  ASSERT_LT(static_cast<int>(a.prompt.size()) + a.max_tokens, 1024);
  ASSERT_GT(static_cast<int>(a.prompt.size() + b.prompt.size()) + a.max_tokens + b.max_tokens, 1024);
  auto sa = Submit(loop, a);
  auto sb = Submit(loop, b);
  ASSERT_TRUE(loop.Start().ok());
  Outcome oa = Drain(*sa);
  Outcome ob = Drain(*sb);
  ASSERT_TRUE(oa.done && ob.done) << oa.error.ToString() << " / " << ob.error.ToString();
  EXPECT_GE(loop.stats().requests_paused, 1);
  EXPECT_EQ(loop.stats().requests_failed, 0);
  // Each ran its course: to max_tokens or an end-of-generation token.
  for (const Outcome* o : {&oa, &ob}) {
    EXPECT_TRUE(o->completion.finish_reason == api::FinishReason::kLength ||
                o->completion.finish_reason == api::FinishReason::kStop);
    if (o->completion.finish_reason == api::FinishReason::kLength) {
      EXPECT_EQ(o->completion.usage.completion_tokens, 300);
    }
  }
}

// Two cold prompts that cannot prefill together: the younger goes back to the queue with
// its progress kept, and resumes from it. That progress is its own work, not reuse.
TEST_F(EngineLoopTest, ARequeuedPrefillDoesNotReportItsOwnProgressAsCached) {
  EngineLoop loop(*model_, Config(2));
  GenerationTask a = Task(LongText("a", 170), 200);  // ~570 of 1024 cells each; a still runs
  GenerationTask b = Task(LongText("b", 170), 4);      // when b needs room
  ASSERT_GT(static_cast<int>(a.prompt.size() + b.prompt.size()), 1024);
  auto sa = Submit(loop, a);
  auto sb = Submit(loop, b);
  ASSERT_TRUE(loop.Start().ok());
  Outcome oa = Drain(*sa);
  Outcome ob = Drain(*sb);
  ASSERT_TRUE(oa.done && ob.done) << oa.error.ToString() << " / " << ob.error.ToString();
  ASSERT_GE(loop.stats().requests_requeued, 1);
  EXPECT_EQ(oa.completion.usage.cached_tokens, 0);
  EXPECT_EQ(ob.completion.usage.cached_tokens, 0);
  EXPECT_EQ(loop.stats().prompt_tokens_cached, 0);
  ASSERT_TRUE(ob.completion.usage.cache.has_value());
  EXPECT_EQ(ob.completion.usage.cache->prefilled_tokens, static_cast<int>(b.prompt.size()));
}

// An exception on the engine thread (here from the finished callback, which runs there)
// fails the request in flight with an internal error; the loop keeps serving.
TEST_F(EngineLoopTest, AnExceptionInAStepFailsTheRequestNotTheProcess) {
  EngineLoop loop(*model_, Config(1));
  int calls = 0;
  loop.SetFinishedCallback([&](const GenerationTask&, const api::Completion&) {
    if (calls++ == 0) throw std::runtime_error("injected");
  });
  ASSERT_TRUE(loop.Start().ok());
  Outcome first = Drain(*Submit(loop, Task(kPrompts[0], 2)));
  EXPECT_FALSE(first.done);
  EXPECT_EQ(first.error.code(), StatusCode::kInternal);
  EXPECT_NE(first.error.message().find("injected"), std::string::npos) << first.error.message();
  EXPECT_EQ(first.n_terminal, 1);
  GenerationTask next = Task(kPrompts[1], 2);
  Outcome second = Drain(*Submit(loop, next));
  ExpectSaneUsage(second, next);
  for (int i = 0; i < 2000 && loop.stats().slots_busy != 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(loop.stats().slots_busy, 0) << "the failed request's slot came free";
}

// A graceful stop writes what the disk tier lacks; a start on the same directory resumes
// the conversation from there, though it never left the device before.

TEST_F(EngineLoopTest, PausedRequestCancelledEndsAtOnce) {
  EngineLoop loop(*model_, Config(2));
  auto sa = Submit(loop, Task(LongText("a", 110), 300));
  auto sb = Submit(loop, Task(LongText("b", 110), 300));
  ASSERT_TRUE(loop.Start().ok());
  for (int i = 0; i < 24000 && loop.stats().requests_paused == 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  ASSERT_EQ(loop.stats().requests_paused, 1);
  sb->Cancel();  // the younger one is the paused one
  Outcome ob = Drain(*sb);
  Outcome oa = Drain(*sa);
  ASSERT_TRUE(oa.done && ob.done) << oa.error.ToString() << " / " << ob.error.ToString();
  EXPECT_EQ(ob.completion.finish_reason, api::FinishReason::kCancelled);
  EXPECT_LT(ob.terminal_order, oa.terminal_order) << "the cancelled request waited for the other to finish";
  // Both slots come free (a slot is released just after its last event).
  for (int i = 0; i < 2000 && loop.stats().slots_busy != 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(loop.stats().slots_busy, 0);
}

// --no-cache: a prompt that extends an earlier one is computed in full, and nothing
// stays behind.

}  // namespace
}  // namespace hearth::server
