// EngineLoop and its cache: the disk tier across restarts, reuse reported, warm-ahead.
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

TEST_F(EngineLoopTest, AStopAndStartOnTheSameCacheDirKeepsTheConversation) {
  EngineConfig c = Config(1);
  c.cache_dir = testing::MakeTempDir() + "/states";
  GenerationTask t = Task(LongText("r", 30), 4);
  t.snapshot_positions = {static_cast<int32_t>(t.prompt.size())};  // where the next one diverges
  {
    EngineLoop loop(*model_, c);
    ASSERT_TRUE(loop.Start().ok());
    ASSERT_TRUE(Drain(*Submit(loop, t)).done);
    loop.Stop();
  }
  // The follow-up carries the whole first prompt, then something else.
  GenerationTask next = t;
  next.prompt.insert(next.prompt.end(), t.prompt.begin() + 1, t.prompt.begin() + 6);
  EngineLoop loop(*model_, c);
  ASSERT_TRUE(loop.Start().ok());
  Outcome o = Drain(*Submit(loop, next));
  ASSERT_TRUE(o.done) << o.error.ToString();
  ASSERT_TRUE(o.completion.usage.cache.has_value());
  EXPECT_EQ(o.completion.usage.cache->tier, "disk");
  EXPECT_EQ(o.completion.usage.cached_tokens, static_cast<int>(t.prompt.size()));
}

// Another model (or KV layout) served from the same --cache-dir keeps its states apart
// and leaves this one's alone: it used to quarantine them as foreign files.
TEST_F(EngineLoopTest, AnotherModelOnTheSameCacheDirLeavesItsStatesAlone) {
  EngineConfig c = Config(1);
  c.cache_dir = testing::MakeTempDir() + "/states";
  c.cache_namespace = "model-a";
  GenerationTask t = Task(LongText("r", 30), 4);
  t.cache_namespace = "model-a|salt";
  t.snapshot_positions = {static_cast<int32_t>(t.prompt.size())};
  {
    EngineLoop loop(*model_, c);
    ASSERT_TRUE(loop.Start().ok());
    ASSERT_TRUE(Drain(*Submit(loop, t)).done);
    loop.Stop();
  }
  {
    EngineConfig other = c;
    other.cache_namespace = "model-b";
    EngineLoop loop(*model_, other);
    ASSERT_TRUE(loop.Start().ok());
    loop.Stop();
  }
  GenerationTask next = t;
  next.prompt.insert(next.prompt.end(), t.prompt.begin() + 1, t.prompt.begin() + 6);
  EngineLoop loop(*model_, c);
  ASSERT_TRUE(loop.Start().ok());
  Outcome o = Drain(*Submit(loop, next));
  ASSERT_TRUE(o.done) << o.error.ToString();
  ASSERT_TRUE(o.completion.usage.cache.has_value());
  EXPECT_EQ(o.completion.usage.cache->tier, "disk");
  EXPECT_EQ(o.completion.usage.cached_tokens, static_cast<int>(t.prompt.size()));
}

TEST(DiskTierDirTest, OneDirectoryPerModelAndStateLayout) {
  const std::string a = DiskTierDir("/c", "model-a", "kv-f16-f16-fa");
  EXPECT_EQ(a.rfind("/c/states-", 0), 0u) << a;
  EXPECT_EQ(a, DiskTierDir("/c", "model-a", "kv-f16-f16-fa"));
  EXPECT_NE(a, DiskTierDir("/c", "model-b", "kv-f16-f16-fa"));
  EXPECT_NE(a, DiskTierDir("/c", "model-a", "kv-q8_0-f16-fa"));
}

// A paused request whose client gives up ends at once, not when room returns.
TEST_F(EngineLoopTest, WithoutThePrefixCacheNothingIsReused) {
  for (bool cached : {true, false}) {
    EngineConfig c = Config(1);
    c.prefix_cache = cached;
    EngineLoop loop(*model_, c);
    ASSERT_TRUE(loop.Start().ok());
    GenerationTask t = Task(LongText("c", 30), 4);
    t.snapshot_positions = {static_cast<int32_t>(t.prompt.size())};  // where the next one diverges
    GenerationTask longer = t;  // the same prompt and then some
    longer.prompt.insert(longer.prompt.end(), t.prompt.begin() + 5, t.prompt.begin() + 9);
    longer.snapshot_positions = {static_cast<int32_t>(longer.prompt.size())};
    Outcome first = Drain(*Submit(loop, t));
    Outcome second = Drain(*Submit(loop, longer));
    ASSERT_TRUE(first.done && second.done);
    EXPECT_EQ(first.completion.usage.cached_tokens, 0);
    if (cached) {
      EXPECT_GT(second.completion.usage.cached_tokens, 0);
    } else {
      EXPECT_EQ(second.completion.usage.cached_tokens, 0);
      EXPECT_EQ(loop.stats().cache.n_states, 0u);
    }
  }
}

// What the prompt reuses reaches the stream when the request is admitted, before its
// first token, and says what the completion will: a stream can report it at its start.
TEST_F(EngineLoopTest, AdmissionTellsTheStreamWhatWasReusedBeforeTheFirstToken) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  GenerationTask t = Task(LongText("r", 30), 4);
  t.snapshot_positions = {static_cast<int32_t>(t.prompt.size())};
  GenerationTask longer = t;
  longer.prompt.insert(longer.prompt.end(), t.prompt.begin() + 5, t.prompt.begin() + 9);
  longer.snapshot_positions = {static_cast<int32_t>(longer.prompt.size())};
  Outcome first = Drain(*Submit(loop, t));
  Outcome second = Drain(*Submit(loop, longer));
  for (const Outcome* o : {&first, &second}) {
    ASSERT_TRUE(o->done) << o->error.ToString();
    ASSERT_EQ(o->n_admitted, 1);
    EXPECT_FALSE(o->admitted_after_delta);
    ASSERT_FALSE(o->deltas.empty());
    EXPECT_LT(o->admitted->order, o->deltas.front().order);
    const api::Usage& at_start = o->admitted->admitted;
    EXPECT_EQ(at_start.prompt_tokens, o->completion.usage.prompt_tokens);
    EXPECT_EQ(at_start.cached_tokens, o->completion.usage.cached_tokens);
    EXPECT_EQ(at_start.completion_tokens, 0);
    ASSERT_TRUE(at_start.cache.has_value());
    EXPECT_EQ(at_start.cache->reused_tokens, at_start.cached_tokens);
    EXPECT_EQ(at_start.cache->prefilled_tokens, at_start.prompt_tokens - at_start.cached_tokens);
  }
  EXPECT_EQ(first.admitted->admitted.cached_tokens, 0);
  EXPECT_GT(second.admitted->admitted.cached_tokens, 0);
}

// Warm-ahead work whose whole prompt the cache already holds computes nothing; work that
// goes past it computes only what is new.
TEST_F(EngineLoopTest, BackgroundWorkTheCacheHoldsIsSkipped) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  GenerationTask t = Task(LongText("w", 30), 4);
  const auto n = static_cast<int32_t>(t.prompt.size());
  t.snapshot_positions = {n};  // taken once the first token is out
  ASSERT_TRUE(Drain(*Submit(loop, t)).done);

  auto run_background = [&](std::vector<engine::Token> prompt) {
    const int64_t before = loop.stats().background_tasks;
    WarmAheadTask bg;
    bg.prompt = std::move(prompt);
    bg.snapshot_positions = {static_cast<int32_t>(bg.prompt.size())};
    auto stream = Submit(loop, std::move(bg));
    ASSERT_NE(stream, nullptr);
    // Background tasks end with one kDone like every task, skipped ones too.
    Outcome o = Drain(*stream);
    ASSERT_TRUE(o.done) << o.error.ToString();
    EXPECT_TRUE(o.deltas.empty()) << "background work produces no output";
    for (int i = 0; i < 2000 && loop.stats().background_tasks == before; ++i) std::this_thread::sleep_for(milliseconds(5));
    ASSERT_EQ(loop.stats().background_tasks, before + 1) << "the background task did not end";
  };
  run_background(t.prompt);
  EXPECT_EQ(loop.stats().background_skipped, 1);
  EXPECT_EQ(loop.stats().background_tokens, 0);

  std::vector<engine::Token> longer = t.prompt;
  longer.insert(longer.end(), t.prompt.begin() + 3, t.prompt.begin() + 7);
  run_background(longer);
  EXPECT_EQ(loop.stats().background_skipped, 1);
  EXPECT_EQ(loop.stats().background_tokens, 4);
}

// A warm-ahead task that fails is no failed request: it has its own counter, and the
// request served next is not disturbed.
TEST_F(EngineLoopTest, AFailedWarmAheadIsCountedApartFromRequests) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  WarmAheadTask bg;
  bg.prompt = Task(LongText("f", 10), 1).prompt;
  bg.prompt.push_back(model_->info().n_vocab + 5);  // no such token: the decode refuses it
  Outcome o = Drain(*Submit(loop, std::move(bg)));
  EXPECT_FALSE(o.done);
  EXPECT_EQ(o.error.code(), StatusCode::kInvalidArgument) << o.error.ToString();
  EXPECT_EQ(loop.stats().background_failed, 1);
  EXPECT_EQ(loop.stats().requests_failed, 0);
  ASSERT_TRUE(Drain(*Submit(loop, Task(LongText("r", 10), 4))).done);
  EXPECT_EQ(loop.stats().requests_failed, 0);
}

// Warm-ahead prefills in steps whose tokens cost what a long prefill's do: with flash
// attention on a CPU, ggml runs steps of fewer than 64 tokens row by row (7x the cost per
// token of a 64-token step), so there its chunks are 64 tokens, elsewhere 32.
TEST_F(EngineLoopTest, WarmAheadStepsAreLongEnoughForTheFlashAttentionTiles) {
  for (engine::FlashAttn fa : {engine::FlashAttn::kOn, engine::FlashAttn::kOff}) {
    EngineConfig c = Config(1, /*n_batch=*/256);
    c.context.flash_attn = fa;
    EngineLoop loop(*model_, c);
    ASSERT_TRUE(loop.Start().ok());
    WarmAheadTask bg;
    bg.prompt = Task(LongText("fa", 80), 1).prompt;
    const auto n = static_cast<int64_t>(bg.prompt.size());
    ASSERT_GT(n, 192) << "enough tokens for the chunk sizes to tell apart";
    const int64_t calls_before = loop.stats().decode_calls;
    Outcome o = Drain(*Submit(loop, std::move(bg)));
    ASSERT_TRUE(o.done) << o.error.ToString();
    for (int i = 0; i < 2000 && loop.stats().background_tasks == 0; ++i) std::this_thread::sleep_for(milliseconds(5));
    ASSERT_EQ(loop.stats().background_tokens, n);
    const int64_t chunk = fa == engine::FlashAttn::kOn && !engine::GpuOffloadBuilt() ? 64 : 32;
    EXPECT_EQ(loop.stats().decode_calls - calls_before, (n + chunk - 1) / chunk) << engine::FlashAttnName(fa);
  }
}

// Warm-ahead queued for a next request that then comes is dropped: the request computes
// or reuses that prefix itself.
TEST_F(EngineLoopTest, WarmAheadOvertakenByItsRequestIsDropped) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Start().ok());
  auto busy = Submit(loop, Task(LongText("b", 20), 24));  // holds the only slot meanwhile
  WarmAheadTask bg;
  bg.prompt = Task(LongText("p", 30), 1).prompt;
  bg.snapshot_positions = {static_cast<int32_t>(bg.prompt.size())};
  GenerationTask next = Task(LongText("p", 30), 2);
  next.prompt = bg.prompt;
  next.prompt.insert(next.prompt.end(), bg.prompt.begin() + 2, bg.prompt.begin() + 6);
  WarmAheadTask other = bg;  // another conversation's: still wanted
  other.prompt = Task(LongText("o", 30), 1).prompt;
  other.snapshot_positions = {static_cast<int32_t>(other.prompt.size())};
  ASSERT_NE(Submit(loop, bg), nullptr);
  ASSERT_NE(Submit(loop, other), nullptr);
  auto follow = Submit(loop, next);
  ASSERT_TRUE(Drain(*busy).done);
  ASSERT_TRUE(Drain(*follow).done);
  for (int i = 0; i < 2000 && loop.stats().background_tasks < 2; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(loop.stats().background_tasks, 2);
  EXPECT_EQ(loop.stats().background_skipped, 1);
  EXPECT_EQ(loop.stats().background_tokens, static_cast<int64_t>(other.prompt.size()));
}

// Invariant 2 for a loop that stops without ever having run: what was queued, requests
// and warm-ahead alike, ends with kUnavailable instead of waiting forever.
TEST_F(EngineLoopTest, TasksQueuedOnALoopThatNeverRanEndWhenItStops) {
  EngineLoop loop(*model_, Config(1));
  ASSERT_TRUE(loop.Open().ok());
  auto request = Submit(loop, Task(LongText("q", 8), 4));
  WarmAheadTask warm;
  warm.prompt = Task(LongText("w", 8), 1).prompt;
  auto background = Submit(loop, std::move(warm));
  ASSERT_NE(request, nullptr);
  ASSERT_NE(background, nullptr);
  loop.Stop();
  for (auto* stream : {request.get(), background.get()}) {
    StreamEvent e;
    ASSERT_TRUE(stream->Next(&e, milliseconds(0))) << "the task got no event";
    EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
    EXPECT_EQ(e.error.code(), StatusCode::kUnavailable);
    EXPECT_FALSE(stream->Next(&e, milliseconds(0))) << "one terminal event only";
  }
}

// Chat tasks go through the output parser: the streamed pieces add up to the final
// completion, field by field.
TEST_F(EngineLoopTest, ChatTaskDeltasAddUpToTheCompletion) {
  auto tmpl = engine::ChatTemplate::Create(*model_, "");
  ASSERT_TRUE(tmpl.ok());
  RequestBuilder builder(*model_, **tmpl, 1024, "test");
  api::GenerationRequest req;
  req.messages.push_back({.role = "user", .content = "Tell me a story."});
  req.max_tokens = 24;
  req.sampling.temperature = 0.0f;
  auto built = builder.Build(req);
  ASSERT_TRUE(std::holds_alternative<BuildResult>(built));
  GenerationTask task = std::get<BuildResult>(built).task;
  ASSERT_TRUE(task.output_format.has_value());
  Outcome o = RunAlone(task);
  ASSERT_TRUE(o.done) << o.error.ToString();
  EXPECT_EQ(o.Text(), o.completion.content);
  EXPECT_EQ(o.Reasoning(), o.completion.reasoning);
  EXPECT_EQ(o.completion.usage.prompt_tokens, static_cast<int>(task.prompt.size()));
  EXPECT_LE(o.completion.usage.completion_tokens, 24);
}

}  // namespace
}  // namespace hearth::server
