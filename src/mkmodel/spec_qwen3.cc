// Qwen3 (qwen3), as llama.cpp's src/models/qwen3.cpp loads it: pre-norm attention with
// q/k RMS norms and NeoX RoPE over the whole head (the graph asserts n_rot == head_dim, so
// rope.dimension_count is left to default to key_length), SwiGLU FFN, tied embeddings.
#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct Qwen3Shape {
  int n_layer;
  int64_t n_embd;
  int64_t n_ff;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  uint32_t n_ctx_train;
};

Qwen3Shape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // Qwen3-0.6B: hidden 1024, 28 layers, 16 query / 8 KV heads of 128, intermediate 3072.
    return {28, 1024, 3072, 16, 8, 128, 40960};
  }
  return {4, 128, 256, 4, 2, 32, 40960};  // Qwen3's training context, as the small one
}

}  // namespace

ModelSpec DescribeQwen3(Preset preset, int64_t n_vocab) {
  const Qwen3Shape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  ModelSpec m;
  m.arch = "qwen3";
  m.u32_keys = {
      {"context_length", s.n_ctx_train},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      {"feed_forward_length", u32(s.n_ff)},
      {"attention.head_count", u32(s.n_head)},
      {"attention.head_count_kv", u32(s.n_head_kv)},
      {"attention.key_length", u32(s.head_dim)},
      {"attention.value_length", u32(s.head_dim)},
  };
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-6f},
      {"rope.freq_base", 1e6f},
  };

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  for (int il = 0; il < s.n_layer; ++il) {
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, s.head_dim * s.n_head));
    t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, s.head_dim * s.n_head_kv));
    t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, s.head_dim * s.n_head_kv));
    t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), s.head_dim * s.n_head, s.n_embd));
    t.push_back(NormWeight(LayerTensorName(il, "attn_q_norm.weight"), s.head_dim));
    t.push_back(NormWeight(LayerTensorName(il, "attn_k_norm.weight"), s.head_dim));
    t.push_back(NormWeight(LayerTensorName(il, "ffn_norm.weight"), s.n_embd));
    AddDenseFfn(il, s.n_embd, s.n_ff, t);
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  return m;
}

}  // namespace hearth::mkmodel
