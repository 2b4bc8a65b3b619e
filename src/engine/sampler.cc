#include "engine/sampler.h"

#include <string>

#include "engine/context.h"
#include "llama.h"

namespace hearth::engine {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f && temperature <= 100.0f)) return InvalidArgument("temperature must be in [0, 100]");
  if (top_k < 0) return InvalidArgument("top_k must not be negative");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return InvalidArgument("top_p must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return InvalidArgument("min_p must be in [0, 1]");
  if (penalty_last_n < -1) return InvalidArgument("penalty_last_n must be >= -1");
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) {
    return InvalidArgument("repetition_penalty must be in (0, 10]");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return InvalidArgument("presence_penalty must be in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return InvalidArgument("frequency_penalty must be in [-2, 2]");
  }
  return Status::Ok();
}

Sampler::Sampler(const Model& model, const SamplingParams& p) {
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  chain_.reset(llama_sampler_chain_init(cp));
  llama_sampler* chain = chain_.get();
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(model.info().n_vocab, p.penalty_last_n, p.repetition_penalty,
                                                                 p.frequency_penalty, p.presence_penalty));
  }
  if (p.temperature <= 0.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    return;
  }
  if (p.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
  if (p.top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 1));
  if (p.min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 1));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(p.seed));
}

void LlamaSamplerDeleter::operator()(llama_sampler* sampler) const { llama_sampler_free(sampler); }

Token Sampler::Sample(Context& ctx, int batch_index) {
  // llama_sampler_sample also accepts the token into the chain.
  return llama_sampler_sample(chain_.get(), ctx.raw(), batch_index);
}

void Sampler::Accept(std::span<const Token> tokens) {
  for (Token t : tokens) llama_sampler_accept(chain_.get(), t);
}

}  // namespace hearth::engine
