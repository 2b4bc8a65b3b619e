#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/context_sequence_store.h"
#include "server/engine_loop.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

// The loop's side as the scheduler sees it, recording what it was asked to do. An end
// gives the sequence back empty and frees the slot, as the loop's does.
class FakeHooks : public SchedulerHooks {
 public:
  void EndSlot(Slot& slot, api::FinishReason reason) override {
    calls.push_back(std::string(slot.background() ? "end warm-ahead" : "end request") +
                    (reason == api::FinishReason::kCancelled ? " (cancelled)" : ""));
    slot.stream->PushDone({});
    slot.lease.Release();
    scheduler->Free(slot);
  }
  void FailSlot(Slot& slot, const Status& error) override {
    calls.push_back("fail");
    slot.stream->PushError(error);
    slot.lease.Release();
    scheduler->Free(slot);
  }
  void DropShadow(Slot&, const char*) override {}
  bool DropYoungestShadow() override {
    calls.push_back("drop a shadow");
    return false;
  }
  api::Usage AdmittedUsage(const Slot&) const override {
    if (throw_on_admit) throw std::runtime_error("injected");
    return {};
  }
  bool throw_on_admit = false;

  Scheduler* scheduler = nullptr;
  std::vector<std::string> calls;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void Open(int n_parallel, int max_queued = 16) {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
    config_.context.n_ctx = 1024;
    config_.context.n_batch = 64;
    config_.context.n_ubatch = 64;
    config_.context.n_threads = 1;
    config_.n_parallel = n_parallel;
    config_.context.n_seq_max = n_parallel + 2;
    config_.max_queued = max_queued;
    auto ctx = engine::Context::Create(*model_, config_.context);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
    store_ = std::make_unique<ContextSequenceStore>(*ctx_);
    cache::CacheConfig cc;
    cc.needs_partial = model_->info().NeedsPartialStates();
    for (int i = 0; i < config_.context.n_seq_max; ++i) cc.sequences.push_back(i);
    cache_ = std::make_unique<cache::PrefixCache>(cc, *store_, nullptr);
    tasks_ = std::make_unique<TaskQueue>(config_.max_queued);
    scheduler_ = std::make_unique<Scheduler>(*model_, *ctx_, *cache_, config_, *tasks_, stats_, hooks_);
    hooks_.scheduler = scheduler_.get();
  }

  std::vector<engine::Token> Prompt(const std::string& word) const {
    std::string text;
    for (int i = 0; i < 12; ++i) text += word + " " + std::to_string(i) + " ";
    return model_->Tokenize(text, /*add_bos=*/true, /*parse_special=*/false);
  }

  std::shared_ptr<RequestStream> PushRequest(const std::string& word) { return PushPrompt(Prompt(word)); }
  std::shared_ptr<RequestStream> PushPrompt(std::vector<engine::Token> prompt) {
    QueuedTask q;
    q.task.prompt = std::move(prompt);
    q.task.sampling.temperature = 0.0f;
    q.stream = std::make_shared<RequestStream>();
    EXPECT_TRUE(tasks_->Push(q).ok());
    return q.stream;
  }

  std::shared_ptr<RequestStream> PushWarmAhead(const std::string& word) {
    QueuedWarmAhead q;
    q.task.prompt = Prompt(word);
    q.stream = std::make_shared<RequestStream>();
    EXPECT_TRUE(tasks_->Push(q).ok());
    return q.stream;
  }

  // What slot `i` runs: "" when free, else its kind and its prompt's word.
  std::string Runs(size_t i) const {
    const Slot* s = scheduler_->slots()[i].get();
    if (s == nullptr) return "";
    for (const char* word : {"alpha", "beta", "one", "two", "three", "four"}) {
      if (s->task.prompt == Prompt(word)) return (s->background() ? "warm-ahead " : "request ") + std::string(word);
    }
    return "something else";
  }

  // Slot `i`'s request has prefilled its prompt's first `n` tokens (all: a token sampled).
  void Prefilled(size_t i, std::optional<size_t> n = std::nullopt) {
    Slot& s = *scheduler_->slots()[i];
    const size_t upto = n.value_or(s.task.prompt.size());
    const auto rest = std::span(s.task.prompt).subspan(s.n_prompt_done, upto - s.n_prompt_done);
    ASSERT_TRUE(ctx_->Prefill(s.lease.seq(), rest, 0, false).ok());
    s.n_prompt_done = upto;
    if (n) return;
    s.generated.push_back(s.task.prompt.back());  // the pending token is the newest generated
    s.pending = s.generated.back();
  }

  const engine::Model* model_ = nullptr;
  EngineConfig config_;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<ContextSequenceStore> store_;
  std::unique_ptr<cache::PrefixCache> cache_;
  std::unique_ptr<TaskQueue> tasks_;
  StatsBoard stats_;
  FakeHooks hooks_;
  std::unique_ptr<Scheduler> scheduler_;
};

bool EndedDone(RequestStream& s) {
  StreamEvent e;
  return s.Next(&e, std::chrono::milliseconds(0)) && e.kind == StreamEvent::Kind::kDone;
}

// Invariant 2: a request queued after warm-ahead runs first, and warm-ahead waits while
// a request runs, even with a slot free.
TEST_F(SchedulerTest, RequestsGoBeforeWarmAheadWhichWaitsWhileOneRuns) {
  Open(/*n_parallel=*/2);
  PushWarmAhead("alpha");
  PushRequest("beta");
  scheduler_->Schedule();
  EXPECT_EQ(Runs(0), "request beta");
  EXPECT_EQ(Runs(1), "") << "warm-ahead started beside a request";
  hooks_.EndSlot(*scheduler_->slots()[0], api::FinishReason::kStop);
  scheduler_->Schedule();
  EXPECT_EQ(Runs(0), "warm-ahead alpha");
}

// Invariant 2: a request arriving ends running warm-ahead (kDone, keeping what it
// computed) before the request is admitted into the slot it held.
TEST_F(SchedulerTest, ARequestPreemptsRunningWarmAhead) {
  Open(/*n_parallel=*/1);
  auto warm = PushWarmAhead("alpha");
  scheduler_->Schedule();
  ASSERT_EQ(Runs(0), "warm-ahead alpha");
  PushRequest("beta");
  scheduler_->Schedule();
  EXPECT_EQ(hooks_.calls, std::vector<std::string>{"end warm-ahead (cancelled)"});
  EXPECT_TRUE(EndedDone(*warm));
  EXPECT_EQ(Runs(0), "request beta");
}

// Invariant 2: warm-ahead for the turn after a reply is stale once a request of that
// conversation begins with its prompt up to its fork, even one that carries another reply
// in its place (an agent's scripted call): it ends unrun. Without a fork it waits for
// the request to end, then runs.
TEST_F(SchedulerTest, ARequestPastAWarmAheadsForkMakesItStale) {
  for (int32_t fork : {10, 0}) {
    SCOPED_TRACE(fork);
    Open(/*n_parallel=*/1);
    QueuedWarmAhead w;
    w.task.prompt = Prompt("alpha");
    w.task.fork = fork;
    w.stream = std::make_shared<RequestStream>();
    ASSERT_TRUE(tasks_->Push(w).ok());
    QueuedTask q;  // the conversation through the fork, then another reply
    q.task.prompt.assign(w.task.prompt.begin(), w.task.prompt.begin() + 10);
    const auto other = Prompt("beta");
    q.task.prompt.insert(q.task.prompt.end(), other.begin() + 1, other.end());
    q.stream = std::make_shared<RequestStream>();
    ASSERT_TRUE(tasks_->Push(q).ok());
    scheduler_->Schedule();
    ASSERT_NE(Runs(0), "");
    EXPECT_EQ(EndedDone(*w.stream), fork > 0) << "the stale task ends unrun, at once";
    hooks_.EndSlot(*scheduler_->slots()[0], api::FinishReason::kStop);
    scheduler_->Schedule();
    EXPECT_EQ(Runs(0), fork > 0 ? "" : "warm-ahead alpha");
  }
}

// The ladder, invariants 1, 3 and 4: shadows first, then the youngest prefill goes back
// to the queue (even a full one), then the youngest of the generating requests pauses;
// a paused request resumes before anything queued is admitted, once the older ones end.
TEST_F(SchedulerTest, LadderRequeuesAPrefillThenPausesTheYoungestGenerating) {
  Open(/*n_parallel=*/3, /*max_queued=*/1);
  for (const char* word : {"one", "two", "three"}) {
    PushRequest(word);
    scheduler_->Schedule();
  }
  Prefilled(0);
  Prefilled(1);
  Prefilled(2, 5);
  PushRequest("four");
  QueuedTask refused;
  refused.task.prompt = Prompt("five");
  refused.stream = std::make_shared<RequestStream>();
  EXPECT_EQ(tasks_->Push(refused).code(), StatusCode::kResourceExhausted) << "the queue holds max_queued";

  ASSERT_TRUE(scheduler_->MakeRoom());
  EXPECT_EQ(hooks_.calls, std::vector<std::string>{"drop a shadow"});
  EXPECT_EQ(Runs(2), "") << "the prefill went back";
  EXPECT_EQ(tasks_->n_requests(), 2) << "a requeued prefill is never refused";
  // The requeued prefill's progress, now an idle cached sequence, moves to RAM next.
  while (!scheduler_->has_paused() && scheduler_->MakeRoom()) {
  }
  EXPECT_EQ(Runs(0), "request one");
  EXPECT_EQ(Runs(1), "") << "the younger generating request paused";
  EXPECT_TRUE(scheduler_->has_paused());
  while (scheduler_->MakeRoom()) {  // the idle cached sequences (the paused one's too) move to RAM
  }
  EXPECT_EQ(Runs(0), "request one") << "one generating request is never paused";
  EXPECT_EQ(stats_.Read().requests_requeued, 1);
  EXPECT_EQ(stats_.Read().requests_paused, 1);

  scheduler_->Schedule();
  EXPECT_EQ(Runs(1) + Runs(2), "") << "nothing queued is admitted while a request is paused";
  hooks_.EndSlot(*scheduler_->slots()[0], api::FinishReason::kStop);
  scheduler_->Schedule();
  EXPECT_FALSE(scheduler_->has_paused());
  EXPECT_EQ(Runs(0), "request two") << "the paused request resumed first";
  EXPECT_EQ(scheduler_->slots()[0]->n_prompt_done, scheduler_->slots()[0]->task.prompt.size());
  EXPECT_EQ(Runs(1), "request three");
  EXPECT_EQ(Runs(2), "request four");
  EXPECT_EQ(std::count(hooks_.calls.begin(), hooks_.calls.end(), "fail"), 0);
}

// Invariant 6: a prompt that will not fit beside an idle cached sequence takes its room
// before its first decode; one that fits leaves the cached sequence where it is.
TEST_F(SchedulerTest, APromptThatWillNotFitTakesItsRoomBeforeItsFirstDecode) {
  Open(/*n_parallel=*/1);
  auto long_prompt = [this](const std::string& word) {
    std::vector<engine::Token> p;
    for (int i = 0; i < 12; ++i) {
      const auto part = Prompt(word + std::to_string(i));
      p.insert(p.end(), part.begin() + (p.empty() ? 0 : 1), part.end());
    }
    return p;
  };
  const auto alpha = long_prompt("alpha");
  const auto beta = long_prompt("beta");
  ASSERT_GT(static_cast<int>(alpha.size() + beta.size()), config_.context.n_ctx);
  ASSERT_LT(static_cast<int>(alpha.size() + Prompt("one").size()), config_.context.n_ctx);
  PushPrompt(alpha);
  scheduler_->Schedule();
  Prefilled(0, alpha.size());
  Slot& done = *scheduler_->slots()[0];
  const int32_t alpha_seq = done.lease.seq();
  done.lease.Adopt("", alpha);  // an idle cached sequence now
  scheduler_->Free(done);
  ASSERT_EQ(ctx_->SeqLength(alpha_seq), static_cast<int>(alpha.size()));

  PushRequest("one");  // fits beside it
  scheduler_->Schedule();
  ASSERT_EQ(Runs(0), "request one");
  EXPECT_EQ(ctx_->SeqLength(alpha_seq), static_cast<int>(alpha.size())) << "moved to RAM for a prompt that fits";
  hooks_.EndSlot(*scheduler_->slots()[0], api::FinishReason::kStop);

  PushPrompt(beta);
  scheduler_->Schedule();
  ASSERT_NE(scheduler_->slots()[0], nullptr);
  EXPECT_EQ(ctx_->SeqLength(alpha_seq), 0) << "the cached sequence still holds its cells";
  EXPECT_EQ(cache_->ResumableDepth("", alpha), static_cast<int32_t>(alpha.size())) << "its state is kept in RAM";
}

// Invariant 6 counts cells, not lengths: a sequence forked from a conversation's (a
// shadow's) shares its cells, so the two leave room for the next follow-up's few new
// tokens, and the fork stays on the device rather than move to RAM for it.
TEST_F(SchedulerTest, SequencesSharingCellsLeaveRoomForTheNextFollowUp) {
  Open(/*n_parallel=*/1);
  std::vector<engine::Token> history;
  for (int i = 0; i < 14; ++i) {
    const auto part = Prompt("alpha" + std::to_string(i));
    history.insert(history.end(), part.begin() + (history.empty() ? 0 : 1), part.end());
  }
  auto follow_up = [&](const std::string& word) {
    std::vector<engine::Token> p = history;
    const auto part = Prompt(word);
    p.insert(p.end(), part.begin() + 1, part.end());
    return p;
  };
  const auto one = follow_up("one"), two = follow_up("two");
  ASSERT_GT(static_cast<int>(history.size() + one.size()), config_.context.n_ctx) << "their lengths summed";
  ASSERT_LT(static_cast<int>(two.size()), config_.context.n_ctx);
  auto push = [&](const std::vector<engine::Token>& prompt) {
    PushPrompt(prompt);
    scheduler_->Schedule();
    ASSERT_NE(scheduler_->slots()[0], nullptr);
    Prefilled(0, prompt.size());
  };
  push(history);
  Slot& first = *scheduler_->slots()[0];
  const std::optional<int32_t> fork = cache_->Fork(first.lease.seq());
  ASSERT_TRUE(fork.has_value());
  ASSERT_TRUE(ctx_->Prefill(*fork, std::span(one).subspan(history.size()), 0, false).ok());
  cache_->Adopt("", *fork, one);
  first.lease.Adopt("", history);
  scheduler_->Free(first);
  ASSERT_EQ(ctx_->UsedCells(), static_cast<int64_t>(one.size())) << "the history's cells are shared";

  push(two);
  EXPECT_EQ(ctx_->SeqLength(*fork), static_cast<int>(one.size())) << "moved to RAM, with room to spare";
}

// SnapshotPolicy's invariant 6: where a short decode costs more a token (flash attention
// on a CPU), a request admitted keeps no state fewer than the efficient batch floor after
// the last stop: no decode of 30 tokens at 130. Warm-ahead keeps every one (where the next
// request resumes).
TEST_F(SchedulerTest, ARequestStopsItsPrefillOnlyAfterAnEfficientBatch) {
  for (bool background : {false, true}) {
    SCOPED_TRACE(background);
    Open(/*n_parallel=*/1);
    ASSERT_EQ(ctx_->efficient_batch_floor(), engine::Context::kCpuFlashAttnTile) << "flash attention is off";
    std::vector<engine::Token> prompt;
    for (const char* word : {"alpha", "beta", "one", "two", "three", "four"}) {
      const auto part = Prompt(word);
      prompt.insert(prompt.end(), part.begin() + (prompt.empty() ? 0 : 1), part.end());
    }
    ASSERT_GE(prompt.size(), 200u);
    prompt.resize(200);
    const std::vector<int32_t> positions = {20, 100, 130, 190, 200};
    std::shared_ptr<RequestStream> stream = std::make_shared<RequestStream>();
    if (background) {
      QueuedWarmAhead w{.stream = stream};
      w.task.prompt = prompt;
      w.task.snapshot_positions = positions;
      ASSERT_TRUE(tasks_->Push(w).ok());
    } else {
      QueuedTask q{.stream = stream};
      q.task.prompt = prompt;
      q.task.snapshot_positions = positions;
      q.task.generation_start = 190;
      ASSERT_TRUE(tasks_->Push(q).ok());
    }
    scheduler_->Schedule();
    ASSERT_NE(scheduler_->slots()[0], nullptr);
    EXPECT_EQ(scheduler_->slots()[0]->task.snapshot_positions,
              background ? positions : (std::vector<int32_t>{100, 190, 200}));
    hooks_.EndSlot(*scheduler_->slots()[0], api::FinishReason::kStop);
  }
}

// engine_loop.h's invariant 2: a task whose admission throws is in no queue and no slot,
// where the step's failure would reach it; it ends with an error before the step fails.
TEST_F(SchedulerTest, ATaskWhoseAdmissionThrowsEndsWithAnError) {
  Open(/*n_parallel=*/1);
  auto stream = PushRequest("alpha");
  hooks_.throw_on_admit = true;
  EXPECT_THROW(scheduler_->Schedule(), std::runtime_error);
  StreamEvent e;
  ASSERT_TRUE(stream->Next(&e, std::chrono::milliseconds(0))) << "the task got no event";
  EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
  EXPECT_EQ(e.error.code(), StatusCode::kInternal);
  EXPECT_EQ(Runs(0), "");
}

}  // namespace
}  // namespace hearth::server
