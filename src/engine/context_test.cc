#include "engine/context.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "engine/log_capture.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

using testing::RandomTokens;

std::vector<float> Copy(std::span<const float> s) { return {s.begin(), s.end()}; }

class ContextTest : public ::testing::TestWithParam<const char*> {
 protected:
  ::testing::AssertionResult LogitsClose(const std::vector<float>& a, const std::vector<float>& b) const {
    return testing::LogitsClose(a, b, ctx_->flash_attn());
  }

  void SetUp() override {
    model_ = testing::LoadTestModel(GetParam());
    ASSERT_NE(model_, nullptr);
    ContextOptions o;
    o.n_ctx = 1024;
    o.n_batch = 128;
    o.n_ubatch = 128;
    o.n_seq_max = 4;
    o.n_threads = 1;  // two cores, and ctest runs two test processes at once
    auto c = Context::Create(*model_, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctx_ = std::move(*c);
  }

  // Cold recompute: clears `seq`, prefills `tokens`, returns the last token's logits.
  std::vector<float> Cold(SeqId seq, const std::vector<Token>& tokens, int chunk = 0) {
    ctx_->ClearSeq(seq);
    Status s = ctx_->Prefill(seq, tokens, chunk, true);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return Copy(ctx_->Logits(ctx_->LastPrefillIndex()));
  }

  // Continues `seq` with `tokens`, returns the last token's logits.
  std::vector<float> Continue(SeqId seq, const std::vector<Token>& tokens) {
    Status s = ctx_->Prefill(seq, tokens, 0, true);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return Copy(ctx_->Logits(ctx_->LastPrefillIndex()));
  }

  const Model* model_ = nullptr;
  std::unique_ptr<Context> ctx_;
};

TEST_P(ContextTest, ChunkedPrefillMatchesOneBatch) {
  auto tokens = RandomTokens(120, 1);
  auto whole = Cold(0, tokens, 128);
  for (int chunk : {1, 7, 32, 64}) {
    EXPECT_TRUE(LogitsClose(whole, Cold(1, tokens, chunk))) << "chunk " << chunk;
    EXPECT_EQ(ctx_->SeqLength(1), 120);
  }
}

TEST_P(ContextTest, FullStateSaveRestoreReproducesLogits) {
  auto prefix = RandomTokens(50, 2), more = RandomTokens(9, 3);
  Cold(0, prefix);
  auto saved = ctx_->SaveState(0, StatePart::kAll);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->size(), ctx_->StateSize(0, StatePart::kAll));
  auto expected = Continue(0, more);
  ASSERT_TRUE(ctx_->RestoreState(0, *saved, StatePart::kAll).ok());
  EXPECT_EQ(ctx_->SeqLength(0), 50);
  EXPECT_TRUE(LogitsClose(expected, Continue(0, more)));
  // Restoring into another sequence works the same.
  ASSERT_TRUE(ctx_->RestoreState(2, *saved, StatePart::kAll).ok());
  EXPECT_TRUE(LogitsClose(expected, Continue(2, more)));
}

TEST_P(ContextTest, PartialStateRestorePlusTrimReproducesLogits) {
  auto prefix = RandomTokens(40, 4), more = RandomTokens(12, 5);
  Cold(0, prefix);
  auto partial = ctx_->SaveState(0, StatePart::kPartialOnly);
  ASSERT_TRUE(partial.ok());
  if (model_->info().has_recurrent) {
    EXPECT_GT(partial->size(), 0u);
    EXPECT_LT(partial->size(), ctx_->StateSize(0, StatePart::kAll));
  }
  auto expected = Continue(0, more);
  // Back to position 40: the partial state brings the recurrent layers back, trimming
  // brings the attention layers back.
  ASSERT_TRUE(ctx_->RestoreState(0, *partial, StatePart::kPartialOnly).ok());
  ASSERT_TRUE(ctx_->TruncateSeq(0, 40).ok());
  EXPECT_EQ(ctx_->SeqLength(0), 40);
  EXPECT_TRUE(LogitsClose(expected, Continue(0, more)));
}

// A sequence whose prefix another one holds, saved without that prefix and restored over
// the other's cells, continues as it would have: the suffix's KV, the shared prefix's KV
// and its own recurrent state (not the other sequence's, which sharing copies) all count.
TEST_P(ContextTest, ASuffixStateRestoredOverAnotherSequencesPrefixReproducesLogits) {
  if (model_->info().n_swa > 0) {
    EXPECT_EQ(ctx_->SaveSuffix(0, 1).status().code(), StatusCode::kUnimplemented);
    return;
  }
  auto shared = RandomTokens(60, 21), own = RandomTokens(25, 22), other = RandomTokens(30, 23),
       more = RandomTokens(7, 24);
  Cold(0, shared);
  Continue(0, other);  // sequence 0: shared + other
  ctx_->CopySeq(0, 1, 60);
  Cold(2, shared);
  ASSERT_TRUE(ctx_->RestoreState(1, *ctx_->SaveState(2, StatePart::kPartialOnly), StatePart::kPartialOnly).ok());
  ctx_->ClearSeq(2);
  Continue(1, own);  // sequence 1: shared (sharing sequence 0's cells) + own
  ASSERT_EQ(ctx_->SeqLength(1), 85);
  auto partial = ctx_->SaveState(1, StatePart::kPartialOnly);
  ASSERT_TRUE(partial.ok());
  auto whole = ctx_->StateSize(1, StatePart::kAll);
  auto suffix = ctx_->SaveSuffix(1, 60);
  ASSERT_TRUE(suffix.ok()) << suffix.status().ToString();
  EXPECT_EQ(ctx_->SeqLength(1), 0);
  EXPECT_LT(suffix->size(), whole);

  std::vector<Token> all = shared;
  all.insert(all.end(), own.begin(), own.end());
  all.insert(all.end(), more.begin(), more.end());
  auto expected = Cold(3, all);
  ctx_->ClearSeq(3);
  ASSERT_TRUE(ctx_->RestoreSuffix(1, *suffix, *partial, /*prefix_src=*/0, 60).ok());
  EXPECT_EQ(ctx_->SeqLength(1), 85);
  EXPECT_TRUE(LogitsClose(expected, Continue(1, more)));
  EXPECT_EQ(ctx_->SeqLength(0), 90);  // the source is as it was

  // A source shorter than the prefix is refused, and leaves the sequence empty.
  ctx_->ClearSeq(2);
  Cold(2, RandomTokens(10, 25));
  EXPECT_EQ(ctx_->RestoreSuffix(3, *suffix, *partial, 2, 60).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx_->SeqLength(3), 0);
}

// A save into the spare buffer (PrepareSpareState) gives the bytes a fresh one does, and
// a state that does not fit the spare's size is saved whole anyway.
TEST_P(ContextTest, SavesIntoTheSpareBufferAreTheSame) {
  Cold(0, RandomTokens(30, 9));
  auto fresh = ctx_->SaveState(0, StatePart::kPartialOnly);
  ASSERT_TRUE(fresh.ok());
  ctx_->PrepareSpareState();
  auto spare = ctx_->SaveState(0, StatePart::kPartialOnly);
  ASSERT_TRUE(spare.ok());
  EXPECT_EQ(*spare, *fresh);
  ctx_->PrepareSpareState();
  auto full = ctx_->SaveState(0, StatePart::kAll);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->size(), ctx_->StateSize(0, StatePart::kAll));
  auto again = ctx_->SaveState(0, StatePart::kPartialOnly);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *fresh);
}

// PrepareSpareState readies, one per call, as many spares as recurrent-only saves came
// between two of its calls (a follow-up's message end and generation start: two), at most
// kMaxSpareStates, and keeps that many ready after fewer saves.
TEST_P(ContextTest, PreparesASpareForEachSaveSinceTheLastPrepare) {
  Cold(0, RandomTokens(30, 9));
  auto save = [&](int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(ctx_->SaveState(0, StatePart::kPartialOnly).ok());
  };
  const size_t per_spare = ctx_->StateSize(0, StatePart::kPartialOnly) > 0 ? 1 : 0;
  save(1);
  ctx_->PrepareSpareState();
  EXPECT_EQ(ctx_->n_spare_states(), 1 * per_spare);
  save(2);
  EXPECT_EQ(ctx_->n_spare_states(), 0u);
  ctx_->PrepareSpareState();
  EXPECT_EQ(ctx_->n_spare_states(), 1 * per_spare) << "one buffer touched per call";
  ctx_->PrepareSpareState();
  EXPECT_EQ(ctx_->n_spare_states(), 2 * per_spare);
  save(1);
  EXPECT_EQ(ctx_->n_spare_states(), 1 * per_spare);
  ctx_->PrepareSpareState();
  EXPECT_EQ(ctx_->n_spare_states(), 2 * per_spare);
  save(Context::kMaxSpareStates + 2);
  for (size_t i = 0; i < Context::kMaxSpareStates + 2; ++i) ctx_->PrepareSpareState();
  EXPECT_EQ(ctx_->n_spare_states(), Context::kMaxSpareStates * per_spare);
}

TEST_P(ContextTest, CopiedSequencesDivergeIndependently) {
  auto prefix = RandomTokens(30, 6), a = RandomTokens(8, 7), b = RandomTokens(8, 8);
  Cold(0, prefix);
  ctx_->CopySeq(0, 1);
  EXPECT_EQ(ctx_->SeqLength(1), 30);
  auto warm_a = Continue(0, a);
  auto warm_b = Continue(1, b);
  auto pa = prefix, pb = prefix;
  pa.insert(pa.end(), a.begin(), a.end());
  pb.insert(pb.end(), b.begin(), b.end());
  EXPECT_TRUE(LogitsClose(Cold(2, pa), warm_a));
  EXPECT_TRUE(LogitsClose(Cold(3, pb), warm_b));
}

TEST_P(ContextTest, BatchedSequencesMatchEachAlone) {
  std::vector<std::vector<Token>> prompts = {RandomTokens(20, 9), RandomTokens(33, 10),
                                             RandomTokens(5, 11)};
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(Cold(static_cast<SeqId>(i), prompts[i]));
  for (size_t i = 0; i < prompts.size(); ++i) ctx_->ClearSeq(static_cast<SeqId>(i));
  Batch batch;
  std::vector<int> last(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (size_t j = 0; j < prompts[i].size(); ++j) {
      last[i] = batch.Add(prompts[i][j], static_cast<Pos>(j), static_cast<SeqId>(i), j + 1 == prompts[i].size());
    }
  }
  ASSERT_TRUE(ctx_->Decode(batch).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(LogitsClose(alone[i], Copy(ctx_->Logits(last[i])))) << "sequence " << i;
  }
  // One decode step for all three at once, as the server's loop does.
  std::vector<Token> next = RandomTokens(3, 12);
  batch.Clear();
  for (size_t i = 0; i < prompts.size(); ++i) {
    last[i] = batch.Add(next[i], ctx_->SeqLength(static_cast<SeqId>(i)), static_cast<SeqId>(i), true);
  }
  ASSERT_TRUE(ctx_->Decode(batch).ok());
  std::vector<std::vector<float>> steps;
  for (size_t i = 0; i < prompts.size(); ++i) steps.push_back(Copy(ctx_->Logits(last[i])));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto full = prompts[i];
    full.push_back(next[i]);
    EXPECT_TRUE(LogitsClose(Cold(3, full), steps[i])) << "sequence " << i;
  }
}

TEST_P(ContextTest, TrimmingBackIsRefusedOnlyForRecurrentState) {
  auto tokens = RandomTokens(30, 13);
  Cold(0, tokens);
  Status s = ctx_->TruncateSeq(0, 20);
  if (model_->info().has_recurrent) {
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    EXPECT_EQ(ctx_->SeqLength(0), 30) << "a refused trim leaves the sequence unchanged";
  } else {
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(ctx_->SeqLength(0), 20);
    std::vector<Token> more = RandomTokens(4, 14);
    auto warm = Continue(0, more);
    std::vector<Token> full(tokens.begin(), tokens.begin() + 20);
    full.insert(full.end(), more.begin(), more.end());
    EXPECT_TRUE(LogitsClose(Cold(1, full), warm));
  }
}

TEST_P(ContextTest, BadInputIsRejectedWithoutSideEffects) {
  Cold(0, RandomTokens(10, 15));
  Batch b;
  b.Add(model_->info().n_vocab + 3, 10, 0, true);
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);
  b.Clear();
  b.Add(-1, 10, 0, true);
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);
  b.Clear();
  b.Add(100, 10, 9, true);  // sequence id beyond n_seq_max
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);
  b.Clear();
  b.Add(100, 15, 0, true);  // gap in positions
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);
  b.Clear();
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);  // empty
  for (int i = 0; i < 200; ++i) b.Add(100, 10 + i, 0, false);       // beyond n_batch
  EXPECT_EQ(ctx_->Decode(b).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx_->SeqLength(0), 10);

  // Longer than the context: refused with the numbers, earlier chunks kept.
  ctx_->ClearSeq(0);
  Status s = ctx_->Prefill(1, RandomTokens(1100, 16), 0, true);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_NE(s.message().find("1024"), std::string::npos);
  EXPECT_EQ(ctx_->SeqLength(1), 1024);
  ctx_->ClearSeq(1);

  // Garbage state bytes.
  std::vector<uint8_t> junk(64, 0xAB);
  EXPECT_EQ(ctx_->RestoreState(2, junk, StatePart::kAll).code(), StatusCode::kDataLoss);
  EXPECT_EQ(ctx_->SeqLength(2), 0);

  // A good state with no free cells for it: told apart from bytes that do not fit.
  ASSERT_TRUE(ctx_->Prefill(0, RandomTokens(600, 18), 0, false).ok());
  auto saved = ctx_->SaveState(0, StatePart::kAll);
  ASSERT_TRUE(saved.ok());
  ctx_->ClearSeq(0);
  ASSERT_TRUE(ctx_->Prefill(1, RandomTokens(600, 19), 0, false).ok());
  // The caller makes room and retries: llama.cpp's complaint is held, not printed.
  ::testing::internal::CaptureStderr();
  const Status no_room = ctx_->RestoreState(0, *saved, StatePart::kAll);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(no_room.code(), StatusCode::kResourceExhausted) << no_room.ToString();
  EXPECT_EQ(printed.find("available cells"), std::string::npos) << printed;
  EXPECT_EQ(ctx_->SeqLength(0), 0);
  ctx_->ClearSeq(1);
  EXPECT_TRUE(ctx_->RestoreState(0, *saved, StatePart::kAll).ok()) << "with room it loads";
  EXPECT_EQ(ctx_->SeqLength(0), 600);
  ctx_->ClearSeq(0);

  // And the context still works.
  auto tokens = RandomTokens(10, 17);
  EXPECT_TRUE(LogitsClose(Cold(3, tokens), Cold(0, tokens)));
}

// UsedCells counts the attention cells llama.cpp holds: a copy shares its source's cells
// (the sequences' lengths summed would count them again), a restore makes new ones. The
// truth is llama.cpp's own count, which it logs (LLAMA_KV_CACHE_DEBUG, read when a
// context is made) before it places a micro-batch: one token in a spare sequence reads it.
TEST_P(ContextTest, UsedCellsCountSharedCellsOnceAsLlamaCppDoes) {
  setenv("LLAMA_KV_CACHE_DEBUG", "1", 1);
  auto made = Context::Create(*model_, ctx_->options());
  unsetenv("LLAMA_KV_CACHE_DEBUG");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ctx_ = std::move(*made);
  const SeqId probe = 3;
  auto llama_used = [&]() -> int64_t {
    int64_t used = -1;
    {
      ScopedLogCapture log(ScopedLogCapture::Mode::kHold);
      EXPECT_TRUE(ctx_->Prefill(probe, RandomTokens(1, 99), 0, false).ok());
      std::istringstream lines(log.text());
      for (std::string line; std::getline(lines, line);) {  // the full-attention cache's line
        const size_t at = line.find("used = "), size = line.find("size = ");  // "%5d" each
        if (at == std::string::npos || size == std::string::npos) continue;
        if (std::stoll(line.substr(size + 7)) == ctx_->options().n_ctx) used = std::stoll(line.substr(at + 7));
      }
    }
    ctx_->ClearSeq(probe);
    return used;
  };
  auto sum_of_lengths = [&] { return ctx_->SeqLength(0) + ctx_->SeqLength(1) + ctx_->SeqLength(2); };

  Cold(0, RandomTokens(100, 31));
  EXPECT_EQ(ctx_->UsedCells(), 100);
  EXPECT_EQ(llama_used(), ctx_->UsedCells());
  ctx_->CopySeq(0, 1);
  Continue(1, RandomTokens(20, 32));
  ctx_->CopySeq(0, 2, 50);
  EXPECT_EQ(sum_of_lengths(), 100 + 120 + 50);
  EXPECT_EQ(ctx_->UsedCells(), 120);
  EXPECT_EQ(llama_used(), ctx_->UsedCells());

  auto saved = ctx_->SaveState(1, StatePart::kAll);
  ASSERT_TRUE(saved.ok());
  ctx_->ClearSeq(1);
  EXPECT_EQ(llama_used(), 100);
  ASSERT_TRUE(ctx_->RestoreState(1, *saved, StatePart::kAll).ok());
  EXPECT_EQ(ctx_->UsedCells(), 220);
  EXPECT_EQ(llama_used(), ctx_->UsedCells());
  // Only an attention-only model trims back; the others refuse and keep their cells.
  const bool trims = !model_->info().NeedsPartialStates();
  ASSERT_EQ(ctx_->TruncateSeq(1, 110).ok(), trims);
  EXPECT_EQ(ctx_->UsedCells(), trims ? 210 : 220);
  EXPECT_EQ(llama_used(), ctx_->UsedCells());
  ctx_->ClearSeq(0);  // 2 keeps 50 of its cells
  EXPECT_EQ(llama_used(), ctx_->UsedCells());
  EXPECT_EQ(ctx_->UsedCells(), 50 + ctx_->SeqLength(1));

  if (model_->info().n_swa > 0) {
    EXPECT_EQ(ctx_->SaveSuffix(1, 100).status().code(), StatusCode::kUnimplemented);
  } else {  // a suffix restored over another sequence's prefix shares it
    auto partial = ctx_->SaveState(1, StatePart::kPartialOnly);
    ASSERT_TRUE(partial.ok());
    ctx_->CopySeq(1, 0, 100);
    auto suffix = ctx_->SaveSuffix(1, 100);
    ASSERT_TRUE(suffix.ok()) << suffix.status().ToString();
    EXPECT_EQ(llama_used(), ctx_->UsedCells());
    ASSERT_TRUE(ctx_->RestoreSuffix(1, *suffix, *partial, /*prefix_src=*/0, 100).ok());
    EXPECT_EQ(llama_used(), ctx_->UsedCells());
  }
  ctx_->ClearSeq(0);
  ctx_->ClearSeq(1);
  ctx_->ClearSeq(2);
  EXPECT_EQ(ctx_->UsedCells(), 0);
  EXPECT_EQ(llama_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, ContextTest,
                         ::testing::Values("qwen35", "qwen35moe", "qwen3", "qwen3next", "gemma4", "granitehybrid",
                                           "gpt-oss"),
                         [](const auto& p) { return testing::TestParamName(p.param); });

// The tiny Gemma 4: three sliding-window layers (window 32, 2 KV heads of 32) and one
// global layer (1 KV head of 64). The tiny gpt-oss: two sliding layers (window 32) and
// two full ones, 2 KV heads of 32 each.
class SlidingWindowContextTest : public ContextTest {
 protected:
  struct KvShape {
    size_t sliding_layers, sliding_kv_bytes;  // per cell of one layer: K and V, f16
    size_t full_kv_bytes;                     // per cell, over all full layers
  };
  KvShape Shape() const {
    if (std::string_view(GetParam()) == "gpt-oss") return {2, 2 * 32 * 2 * 2, 2 * 2 * 32 * 2 * 2};
    return {3, 2 * 32 * 2 * 2, 1 * 64 * 2 * 2};
  }
};

// A sliding-window layer forgets what slid out of its window once llama.cpp reuses those
// cells (the window's cache here holds 256: 32 per sequence plus a micro-batch, rounded
// up): trimming back past what it still holds is refused (and changes nothing), as a
// recurrent trim is; within what it holds the trim works.
TEST_P(SlidingWindowContextTest, TrimmingPastTheWindowIsRefused) {
  auto tokens = RandomTokens(400, 15);
  Cold(0, tokens);
  Status s = ctx_->TruncateSeq(0, 150);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_EQ(ctx_->SeqLength(0), 400);
  ASSERT_TRUE(ctx_->TruncateSeq(0, 380).ok());
  std::vector<Token> more = RandomTokens(4, 16);
  auto warm = Continue(0, more);
  std::vector<Token> full(tokens.begin(), tokens.begin() + 380);
  full.insert(full.end(), more.begin(), more.end());
  EXPECT_TRUE(LogitsClose(Cold(1, full), warm));
}

// The partial state of a sliding-window model is the window's KV: its size stops growing
// once the sequence is longer than the window, and it is what a 50-position resume needs.
TEST_P(SlidingWindowContextTest, PartialStateIsTheWindowsKv) {
  Cold(0, RandomTokens(40, 17));
  const size_t at_40 = ctx_->StateSize(0, StatePart::kPartialOnly);
  Cold(0, RandomTokens(200, 17));
  const size_t at_200 = ctx_->StateSize(0, StatePart::kPartialOnly);
  EXPECT_EQ(at_40, at_200);
  // The sliding layers' 32 cells of K and V; plus per-cell metadata.
  const KvShape shape = Shape();
  const size_t window_kv = shape.sliding_layers * 32 * shape.sliding_kv_bytes;
  EXPECT_GE(at_200, window_kv);
  EXPECT_LT(at_200, window_kv + 4096);
  // The whole state adds the full layers' 200 positions.
  EXPECT_GE(ctx_->StateSize(0, StatePart::kAll), at_200 + 200 * shape.full_kv_bytes);
}

INSTANTIATE_TEST_SUITE_P(Models, SlidingWindowContextTest, ::testing::Values("gemma4", "gpt-oss"),
                         [](const auto& p) { return testing::TestParamName(p.param); });

TEST(ContextOptionsTest, ValidateNamesTheBadField) {
  ContextOptions o;
  o.n_ubatch = o.n_batch + 1;
  EXPECT_NE(o.Validate().message().find("n_ubatch"), std::string::npos);
  o = ContextOptions{};
  o.n_seq_max = 0;
  EXPECT_NE(o.Validate().message().find("n_seq_max"), std::string::npos);
  EXPECT_TRUE(ContextOptions{}.Validate().ok());
}

}  // namespace
}  // namespace hearth::engine
