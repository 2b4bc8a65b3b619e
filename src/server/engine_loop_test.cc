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
#include "server/request_builder.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using std::chrono::milliseconds;

// Only a guard against a hung engine; no assertion depends on how long anything takes.
constexpr milliseconds kHangGuard{120000};

// Everything one request's stream delivered.
struct Outcome {
  std::optional<StreamEvent> admitted;  // the kAdmitted event, when one came
  int n_admitted = 0;
  bool admitted_after_delta = false;
  std::vector<StreamEvent> deltas;
  int n_terminal = 0;  // kDone + kError events seen
  bool done = false;
  api::Completion completion;  // when done
  Status error;                // when it ended with kError
  uint64_t terminal_order = 0;

  std::string Text() const {
    std::string t;
    for (const auto& d : deltas) t += d.delta.content;
    return t;
  }
  std::string Reasoning() const {
    std::string t;
    for (const auto& d : deltas) t += d.delta.reasoning;
    return t;
  }
  uint64_t FirstOrder() const { return deltas.empty() ? terminal_order : deltas.front().order; }
};

// Reads `stream` until its kDone or kError event.
Outcome Drain(RequestStream& stream) {
  Outcome out;
  StreamEvent ev;
  while (out.n_terminal == 0) {
    if (!stream.Next(&ev, kHangGuard)) {
      ADD_FAILURE() << "no event from the engine";
      return out;
    }
    switch (ev.kind) {
      case StreamEvent::Kind::kAdmitted:
        out.n_admitted++;
        out.admitted_after_delta |= !out.deltas.empty();
        out.admitted = std::move(ev);
        break;
      case StreamEvent::Kind::kDelta:
        out.deltas.push_back(std::move(ev));
        break;
      case StreamEvent::Kind::kDone:
        out.n_terminal++;
        out.done = true;
        out.completion = std::move(ev.completion);
        out.terminal_order = ev.order;
        break;
      case StreamEvent::Kind::kError:
        out.n_terminal++;
        out.error = ev.error;
        out.terminal_order = ev.order;
        break;
    }
  }
  return out;
}

// Waits for the first delta of `stream`; false if the request ended first.
bool WaitForFirstDelta(RequestStream& stream, Outcome* out) {
  StreamEvent ev;
  do {
    if (!stream.Next(&ev, kHangGuard)) return false;
  } while (ev.kind == StreamEvent::Kind::kAdmitted);
  if (ev.kind != StreamEvent::Kind::kDelta) return false;
  out->deltas.push_back(std::move(ev));
  return true;
}

void AppendRest(RequestStream& stream, Outcome* out) {
  Outcome rest = Drain(stream);
  for (auto& d : rest.deltas) out->deltas.push_back(std::move(d));
  out->n_terminal = rest.n_terminal;
  out->done = rest.done;
  out->completion = std::move(rest.completion);
  out->error = rest.error;
  out->terminal_order = rest.terminal_order;
}

class EngineLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
  }

  static EngineConfig Config(int n_seq, int n_batch = 64, int max_queued = 16) {
    EngineConfig c;
    c.context.n_ctx = 1024;
    c.context.n_batch = n_batch;
    c.context.n_ubatch = n_batch;
    c.n_parallel = n_seq;
    c.context.n_seq_max = n_seq + 2;  // room for sequences the prefix cache keeps
    c.context.n_threads = 1;  // two cores, and ctest runs two test processes at once
    c.max_queued = max_queued;
    return c;
  }

  // A greedy raw-text task.
  GenerationTask Task(const std::string& text, int max_tokens) const {
    GenerationTask t;
    t.prompt = model_->Tokenize(text, /*add_bos=*/true, /*parse_special=*/false);
    t.sampling.temperature = 0.0f;
    t.max_tokens = max_tokens;
    return t;
  }

  std::shared_ptr<RequestStream> Submit(EngineLoop& loop, GenerationTask task) {
    auto s = loop.Submit(std::move(task));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }
  std::shared_ptr<RequestStream> Submit(EngineLoop& loop, WarmAheadTask task) {
    auto s = loop.Submit(std::move(task));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  // Runs `task` alone on a fresh loop and returns its outcome.
  Outcome RunAlone(const GenerationTask& task, int n_batch = 64) {
    EngineLoop loop(*model_, Config(1, n_batch));
    EXPECT_TRUE(loop.Start().ok());
    auto s = Submit(loop, task);
    if (!s) return {};
    return Drain(*s);
  }

  const engine::Model* model_ = nullptr;
};

void ExpectSaneUsage(const Outcome& o, const GenerationTask& task) {
  ASSERT_TRUE(o.done) << o.error.ToString();
  const api::Usage& u = o.completion.usage;
  EXPECT_EQ(u.prompt_tokens, static_cast<int>(task.prompt.size()));
  EXPECT_GE(u.cached_tokens, 0);
  EXPECT_LE(u.cached_tokens, u.prompt_tokens);
  EXPECT_GE(u.completion_tokens, 0);
  EXPECT_LE(u.completion_tokens, task.max_tokens);
  if (o.completion.finish_reason == api::FinishReason::kLength) {
    EXPECT_EQ(u.completion_tokens, task.max_tokens);
  }
  // The stream and the final completion tell the same text.
  EXPECT_EQ(o.Text(), o.completion.content);
}

const char* const kPrompts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "In a hole in the ground there lived a hobbit.",
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael. Some years ago, never mind how long precisely,",
    "All happy families are alike; each unhappy family is unhappy in its own way.",
    "Happy families are all alike, said nobody in particular.",
};

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

// A prompt of about n_words * 4 tokens, different for each `tag`.
std::string LongText(const std::string& tag, int n_words) {
  std::string t;
  for (int i = 0; i < n_words; ++i) t += tag + std::to_string(i) + " ";
  return t;
}

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
