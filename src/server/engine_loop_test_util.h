// What the EngineLoop tests share (engine_loop_*_test.cc): a fixture on the tiny qwen35
// model, and readers of a request's stream.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_loop.h"
#include "testing/test_env.h"

namespace hearth::server {

// Only a guard against a hung engine; no assertion depends on how long anything takes.
inline constexpr std::chrono::milliseconds kHangGuard{120000};

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
inline Outcome Drain(RequestStream& stream) {
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
inline bool WaitForFirstDelta(RequestStream& stream, Outcome* out) {
  StreamEvent ev;
  do {
    if (!stream.Next(&ev, kHangGuard)) return false;
  } while (ev.kind == StreamEvent::Kind::kAdmitted);
  if (ev.kind != StreamEvent::Kind::kDelta) return false;
  out->deltas.push_back(std::move(ev));
  return true;
}

inline void AppendRest(RequestStream& stream, Outcome* out) {
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

inline void ExpectSaneUsage(const Outcome& o, const GenerationTask& task) {
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

inline const char* const kPrompts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "In a hole in the ground there lived a hobbit.",
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael. Some years ago, never mind how long precisely,",
    "All happy families are alike; each unhappy family is unhappy in its own way.",
    "Happy families are all alike, said nobody in particular.",
};

// A prompt of about n_words * 4 tokens, different for each `tag`.
inline std::string LongText(const std::string& tag, int n_words) {
  std::string t;
  for (int i = 0; i < n_words; ++i) t += tag + std::to_string(i) + " ";
  return t;
}

}  // namespace hearth::server
