// Sampler: picks the next token from a Context's logits with llama.cpp's sampler chain.
//
// Thread safety: owned by one thread (the engine loop), like the Context it reads.
//
// The chain, in order: penalties (repetition / presence / frequency over the last
// penalty_last_n tokens), top-k, top-p, min-p, temperature, then a seeded draw. With
// temperature <= 0 it is greedy (argmax) and every other setting but penalties is moot.
//
// What the chain is shown: llama_sampler_sample copies every logit into a candidate array
// first (n_vocab of them: 248k for Qwen3.5, 3 MB per token per stream) before its steps
// read them. Without penalties (the only step before top-k that reads the whole
// vocabulary) that copy is not needed: a greedy sampler takes the first largest logit, as
// llama.cpp's greedy step does, and a top-k one hands the chain only the k best candidates,
// sorted, which the chain's own top-k leaves as they are. Both passes over the logits are
// engine/logit_scan.h's (vector code, AVX2 where the CPU has it). The token drawn is the
// one the whole-vocabulary chain draws (sampler_test.cc). With 8 streams on a small model
// this raised aggregate decode by a third to a half (docs/benchmarks.md, "Concurrent
// streams").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/model.h"
#include "engine/types.h"

struct llama_sampler;
struct llama_token_data;

namespace hearth::engine {

struct LlamaSamplerDeleter {
  void operator()(llama_sampler* sampler) const;
};

class Context;

struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;           // 0: off
  float top_p = 0.95f;      // 1: off
  float min_p = 0.05f;      // 0: off
  uint32_t seed = 0xFFFFFFFF;  // 0xFFFFFFFF: random
  int penalty_last_n = 64;
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  // Errors: kInvalidArgument naming the field and its allowed range.
  Status Validate() const;
};

class Sampler {
 public:
  // REQUIRES: params.Validate().ok().
  Sampler(const Model& model, const SamplingParams& params);
  ~Sampler();  // out of line: llama_token_data is complete only in sampler.cc
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Samples from the logits at `batch_index` of ctx's last Decode and records the token
  // for the penalties.
  Token Sample(Context& ctx, int batch_index);
  // Records tokens already in the sequence (the prompt) for the penalties.
  void Accept(std::span<const Token> tokens);

 private:
  // Which candidates the chain is shown (see the file comment).
  enum class Shown { kWholeVocabulary, kArgmaxOnly, kTopK };

  std::unique_ptr<llama_sampler, LlamaSamplerDeleter> chain_;
  Shown shown_ = Shown::kWholeVocabulary;
  int top_k_ = 0;
  std::vector<llama_token_data> candidates_;  // kTopK's, reused from token to token
};

}  // namespace hearth::engine
