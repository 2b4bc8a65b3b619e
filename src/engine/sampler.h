// Sampler: picks the next token from a Context's logits with llama.cpp's sampler chain.
//
// Thread safety: owned by one thread (the engine loop), like the Context it reads.
//
// The chain, in order: penalties (repetition / presence / frequency over the last
// penalty_last_n tokens), top-k, top-p, min-p, temperature, then a seeded draw. With
// temperature <= 0 it is greedy (argmax) and every other setting but penalties is moot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "engine/model.h"
#include "engine/types.h"

struct llama_sampler;

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
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Samples from the logits at `batch_index` of ctx's last Decode and records the token
  // for the penalties.
  Token Sample(Context& ctx, int batch_index);
  // Records tokens already in the sequence (the prompt) for the penalties.
  void Accept(std::span<const Token> tokens);

 private:
  std::unique_ptr<llama_sampler, LlamaSamplerDeleter> chain_;
};

}  // namespace hearth::engine
