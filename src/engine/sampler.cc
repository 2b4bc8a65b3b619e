#include "engine/sampler.h"

#include <algorithm>
#include <string>

#include "engine/context.h"
#include "engine/logit_scan.h"
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
  const bool penalties = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (penalties) {
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(model.info().n_vocab, p.penalty_last_n, p.repetition_penalty,
                                                                 p.frequency_penalty, p.presence_penalty));
  }
  if (p.temperature <= 0.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    if (!penalties) shown_ = Shown::kArgmaxOnly;
    return;
  }
  if (!penalties && p.top_k > 0 && p.top_k < model.info().n_vocab) {
    shown_ = Shown::kTopK;
    top_k_ = p.top_k;
  }
  if (p.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
  if (p.top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 1));
  if (p.min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 1));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(p.seed));
}

void LlamaSamplerDeleter::operator()(llama_sampler* sampler) const { llama_sampler_free(sampler); }

Sampler::~Sampler() = default;

namespace {

// The k best candidates, best first, into `out` (k < logits.size()). One pass with a heap
// whose top is the worst kept: FirstAbove skips, in vector steps, every logit that does
// not beat it, which once the heap holds good candidates is nearly all of them.
void TopK(std::span<const float> logits, int k, std::vector<llama_token_data>& out) {
  const auto worse = [](const llama_token_data& a, const llama_token_data& b) { return a.logit > b.logit; };
  out.clear();
  for (Token id = 0; id < k; ++id) out.push_back({id, logits[static_cast<size_t>(id)], 0.0f});
  std::make_heap(out.begin(), out.end(), worse);
  for (size_t id = static_cast<size_t>(k); (id = FirstAbove(logits, id, out.front().logit)) < logits.size(); ++id) {
    std::pop_heap(out.begin(), out.end(), worse);
    out.back() = {static_cast<Token>(id), logits[id], 0.0f};
    std::push_heap(out.begin(), out.end(), worse);
  }
  std::sort_heap(out.begin(), out.end(), worse);  // best first
}

}  // namespace

Token Sampler::Sample(Context& ctx, int batch_index) {
  // llama_sampler_sample also accepts the token into the chain.
  const std::span<const float> logits =
      shown_ == Shown::kWholeVocabulary ? std::span<const float>() : ctx.Logits(batch_index);
  // (No logits at that index: llama.cpp's own path, which fails loudly, rather than a read
  // past an empty span.)
  if (logits.empty()) return llama_sampler_sample(chain_.get(), ctx.raw(), batch_index);
  Token token;
  if (shown_ == Shown::kArgmaxOnly) {
    token = FirstArgmax(logits);
  } else {
    TopK(logits, top_k_, candidates_);
    llama_token_data_array shown{candidates_.data(), candidates_.size(), -1, /*sorted=*/true};
    llama_sampler_apply(chain_.get(), &shown);
    token = shown.data[shown.selected].id;
  }
  llama_sampler_accept(chain_.get(), token);
  return token;
}

void Sampler::Accept(std::span<const Token> tokens) {
  for (Token t : tokens) llama_sampler_accept(chain_.get(), t);
}

}  // namespace hearth::engine
