#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "engine/context.h"
#include "llama.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

using testing::RandomTokens;

struct ChainDeleter {
  void operator()(llama_sampler* chain) const { llama_sampler_free(chain); }
};
using Chain = std::unique_ptr<llama_sampler, ChainDeleter>;

// The chain Sampler's file comment describes, built here from llama.cpp's parts and shown
// the whole vocabulary by llama_sampler_sample: what Sampler must agree with.
Chain ReferenceChain(const Model& model, const SamplingParams& p) {
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  Chain chain(llama_sampler_chain_init(cp));
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_penalties(model.info().n_vocab, p.penalty_last_n, p.repetition_penalty,
                                                                       p.frequency_penalty, p.presence_penalty));
  }
  if (p.temperature <= 0.0f) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_greedy());
    return chain;
  }
  if (p.top_k > 0) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_k(p.top_k));
  if (p.top_p < 1.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_p(p.top_p, 1));
  if (p.min_p > 0.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_min_p(p.min_p, 1));
  llama_sampler_chain_add(chain.get(), llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain.get(), llama_sampler_init_dist(p.seed));
  return chain;
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SamplingParams Sampled(float temperature, int top_k, float top_p, float min_p, uint32_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

struct Case {
  const char* name;
  SamplingParams params;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// kRows rows of logits from one decode of the real Qwen3.5 vocabulary.
class SamplerRows : public ::testing::Test {
 protected:
  static constexpr int kRows = 48;

  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");  // Qwen3.5's whole vocabulary: 248k tokens
    ASSERT_NE(model_, nullptr);
    ContextOptions o;
    o.n_ctx = 256;
    o.n_batch = kRows;
    o.n_ubatch = kRows;
    o.n_seq_max = 1;
    o.n_threads = 1;
    auto c = Context::Create(*model_, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctx_ = std::move(*c);
    // One decode with logits for every row: kRows different distributions to draw from.
    Batch batch;
    const auto prompt = RandomTokens(kRows, 5);
    for (int i = 0; i < kRows; ++i) batch.Add(prompt[static_cast<size_t>(i)], i, 0, /*want_logits=*/true);
    ASSERT_TRUE(ctx_->Decode(batch).ok());
  }

  const Model* model_ = nullptr;
  std::unique_ptr<Context> ctx_;
};

class SamplerTest : public SamplerRows, public ::testing::WithParamInterface<Case> {};

TEST_P(SamplerTest, DrawsWhatTheWholeVocabularyChainDraws) {
  const SamplingParams& params = GetParam().params;
  Sampler sampler(*model_, params);
  Chain reference = ReferenceChain(*model_, params);
  for (int round = 0; round < 4; ++round) {
    for (int row = 0; row < kRows; ++row) {
      const Token token = sampler.Sample(*ctx_, row);
      ASSERT_EQ(token, llama_sampler_sample(reference.get(), ctx_->raw(), row)) << "round " << round << ", row " << row;
    }
  }
}

// The defaults' draw picks some rows' tokens differently from round to round: the
// comparison above covers the seeded draw, not only the candidates' best.
TEST_F(SamplerRows, ADrawAtTheDefaultsVariesFromRoundToRound) {
  Sampler sampler(*model_, Sampled(0.8f, 40, 0.95f, 0.05f, 7));
  std::set<std::pair<int, Token>> drawn;  // (row, token)
  for (int round = 0; round < 4; ++round) {
    for (int row = 0; row < kRows; ++row) drawn.emplace(row, sampler.Sample(*ctx_, row));
  }
  EXPECT_GT(drawn.size(), static_cast<size_t>(kRows));
}

SamplingParams WithPenalty(SamplingParams p) {
  p.repetition_penalty = 1.3f;
  return p;
}

INSTANTIATE_TEST_SUITE_P(Params, SamplerTest,
                         ::testing::Values(Case{"argmax", Greedy()},
                                           Case{"top_k_shown", Sampled(0.8f, 40, 0.95f, 0.05f, 7)},  // the defaults
                                           Case{"top_k_alone", Sampled(1.5f, 5, 1.0f, 0.0f, 11)},
                                           Case{"no_top_k", Sampled(1.0f, 0, 0.9f, 0.0f, 13)},  // whole vocabulary
                                           Case{"penalties", WithPenalty(Sampled(0.8f, 40, 0.95f, 0.05f, 17))},
                                           Case{"greedy_with_penalties", WithPenalty(Greedy())}),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace hearth::engine
