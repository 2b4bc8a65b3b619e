// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE, general.architecture "gpt-oss"), as
// src/models/openai-moe.cpp loads it and conversion/gpt_oss.py writes real checkpoints.
//
// What the loader and graph expect, and how this file meets it:
//   - Sliding-window layers interleaved with full attention: the loader marks layers with
//     a period (attention.sliding_window_pattern, default 2: layer il slides when il is
//     even), as gpt-oss-20b/120b alternate; no key is written, so the default holds.
//     attention.sliding_window is required.
//   - Attention: separate q/k/v with biases (the released models have them), NeoX RoPE over
//     the whole head (n_rot is the head size, key_length), an output projection with a
//     bias, and one learned sink logit per query head (attn_sinks, {n_head}): the softmax
//     over each head's scores gets that extra term, so a head can attend to nothing.
//     n_head * head_dim need not be n_embd (the 20B: 64 x 64 over 2880).
//   - MoE on every layer, no shared expert: a router with a bias, gate / up / down expert
//     stacks each with a bias, OpenAI's clamped SwiGLU; softmax over the chosen experts'
//     logits. The layer's pre-FFN norm is post_attention_norm (attn_post_norm).
//   - The LM head is untied: output.weight is required.
#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct GptOssShape {
  int n_layer;
  int64_t n_embd;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t n_expert;
  int64_t n_expert_used;
  int64_t n_ff_exp;
  uint32_t sliding_window;
};

constexpr uint32_t kContextLength = 131072;  // the released models' (YaRN over 4096)

GptOssShape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // gpt-oss-20b's depth and rhythm (24 layers, sliding and full alternating, window
    // 128, heads of 64, top-4 routing) scaled down: hidden 640, 16 query / 4 KV heads,
    // 16 experts of 640: ~0.68 B parameters with the 128k vocab, a quarter of it the two
    // untied embedding matrices.
    return {24, 640, 16, 4, 64, 16, 4, 640, 128};
  }
  // Two sliding layers and two full ones. Hidden 64 (the heads project up to 128, as
  // the 20B's do from 2880 to 4096): the two untied 128k-token embedding matrices are
  // most of the file, and at 64 it is as small as the tied families' tiny files. A window
  // of 32: shorter than the tests' prompts, so a resume that ignored the window would show.
  return {4, 64, 4, 2, 32, 4, 2, 128, 32};
}

TensorSpec Bias(std::string name, std::vector<int64_t> ne) {
  return TensorSpec{std::move(name), std::move(ne), DType::kF32, Fill::Constant(0.0f)};
}

void AddAttention(const GptOssShape& s, int il, std::vector<TensorSpec>& t) {
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_head_kv * s.head_dim;
  t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, q_dim));
  t.push_back(Bias(LayerTensorName(il, "attn_q.bias"), {q_dim}));
  t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, kv_dim));
  t.push_back(Bias(LayerTensorName(il, "attn_k.bias"), {kv_dim}));
  t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, kv_dim));
  t.push_back(Bias(LayerTensorName(il, "attn_v.bias"), {kv_dim}));
  t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), q_dim, s.n_embd));
  t.push_back(Bias(LayerTensorName(il, "attn_output.bias"), {s.n_embd}));
  // Sink logits of the order of the scores (unit variance over random weights), so
  // each head gives the sink a real share, not all or nothing.
  t.push_back(TensorSpec{LayerTensorName(il, "attn_sinks.weight"), {s.n_head}, DType::kF32, Fill::Uniform(1.0f)});
}

void AddMoe(const GptOssShape& s, int il, std::vector<TensorSpec>& t) {
  // The router stays F32, as the converter keeps it.
  TensorSpec router = Matrix(LayerTensorName(il, "ffn_gate_inp.weight"), s.n_embd, s.n_expert);
  router.type = DType::kF32;
  t.push_back(router);
  t.push_back(Bias(LayerTensorName(il, "ffn_gate_inp.bias"), {s.n_expert}));
  t.push_back(Matrix(LayerTensorName(il, "ffn_gate_exps.weight"), s.n_embd, s.n_ff_exp, s.n_expert));
  t.push_back(Bias(LayerTensorName(il, "ffn_gate_exps.bias"), {s.n_ff_exp, s.n_expert}));
  t.push_back(Matrix(LayerTensorName(il, "ffn_up_exps.weight"), s.n_embd, s.n_ff_exp, s.n_expert));
  t.push_back(Bias(LayerTensorName(il, "ffn_up_exps.bias"), {s.n_ff_exp, s.n_expert}));
  t.push_back(Matrix(LayerTensorName(il, "ffn_down_exps.weight"), s.n_ff_exp, s.n_embd, s.n_expert));
  t.push_back(Bias(LayerTensorName(il, "ffn_down_exps.bias"), {s.n_embd, s.n_expert}));
}

}  // namespace

ModelSpec DescribeGptOss(Preset preset, int64_t n_vocab) {
  const GptOssShape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  ModelSpec m;
  m.arch = "gpt-oss";
  m.u32_keys = {
      {"context_length", kContextLength},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      {"feed_forward_length", u32(s.n_ff_exp)},
      {"expert_feed_forward_length", u32(s.n_ff_exp)},
      {"expert_count", u32(s.n_expert)},
      {"expert_used_count", u32(s.n_expert_used)},
      {"attention.head_count", u32(s.n_head)},
      {"attention.head_count_kv", u32(s.n_head_kv)},
      {"attention.key_length", u32(s.head_dim)},
      {"attention.value_length", u32(s.head_dim)},
      {"attention.sliding_window", s.sliding_window},
  };
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-5f},
      {"rope.freq_base", 150000.0f},
  };

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  for (int il = 0; il < s.n_layer; ++il) {
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    AddAttention(s, il, t);
    t.push_back(NormWeight(LayerTensorName(il, "post_attention_norm.weight"), s.n_embd));
    AddMoe(s, il, t);
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  // Untied: the same scale as the embedding, so logits keep the spread TokenEmbedding
  // describes.
  TensorSpec output = TokenEmbedding(s.n_embd, n_vocab);
  output.name = "output.weight";
  t.push_back(output);
  return m;
}

VocabEdit DescribeGptOssVocab() {
  // gpt-oss's tokenizer is o200k_harmony (a 201k BPE), which no vocab llama.cpp ships;
  // llama 3's (ggml-vocab-llama-bpe.gguf) is byte-level BPE too, and "gpt-4o" names the
  // o200k pre-tokenizer regex that real gpt-oss files carry. The tokens are the ones
  // openai-gpt-oss-120b.jinja emits or the model ends a turn with, all control tokens as
  // in o200k_harmony. llama.cpp recognizes them by their text: <|return|> (the final
  // answer's end) and <|call|> (a tool call's) end generation, <|end|> (an analysis or
  // past message's end) does not, and <|channel|>, <|message|>, <|start|>, <|constrain|>
  // are rendered in the output for the chat parser.
  VocabEdit e;
  e.pre = "gpt-4o";
  e.tokens = {{"<|startoftext|>"}, {"<|endoftext|>"}, {"<|return|>"},  {"<|constrain|>"}, {"<|channel|>"},
              {"<|start|>"},       {"<|end|>"},       {"<|message|>"}, {"<|call|>"}};
  e.bos = "<|startoftext|>";
  e.eos = "<|return|>";
  e.add_bos = false;
  return e;
}

}  // namespace hearth::mkmodel
