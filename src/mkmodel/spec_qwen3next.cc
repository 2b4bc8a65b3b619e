// Qwen3-Next (qwen3next), as llama.cpp's src/models/qwen3next.cpp loads it and
// conversion/qwen.py (Qwen3NextModel) writes real checkpoints.
//
// The layer pattern of Qwen3.5 (full attention when (il + 1) % full_attention_interval
// == 0, Gated DeltaNet otherwise), with these differences the loader and graph hold to:
//   - Every FFN is MoE (routed experts + a sigmoid-gated shared expert); the loader
//     refuses zero experts.
//   - DeltaNet layers take beta and alpha from one fused projection, ssm_ba
//     {n_embd, 2 * value heads}, split per key head; q/k/v and the output gate z come as
//     attn_qkv and attn_gate, as the converter splits in_proj_qkvz.
//   - Attention layers: attn_q carries query and gate per head ({n_embd, 2 * head_dim *
//     n_head}); q/k RMS norms; plain NeoX RoPE over rope.dimension_count (a quarter of the
//     head: partial_rotary_factor 0.25), no M-RoPE sections.
//   - ssm_a holds -exp(A_log), ssm_dt.bias is dt_bias, ssm_conv1d {conv_kernel, conv_dim}
//     F32; norms are stored as 1 + w (the converter adds 1), so untrained ones are all ones.
//   - Tied embeddings are allowed (output.weight is optional); the real model has its own
//     LM head, the test model ties to keep the file small.
#include <cmath>

#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct Qwen3NextShape {
  int n_layer;
  int64_t n_embd;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t n_rot;
  int64_t ssm_k_heads;   // ssm.group_count
  int64_t ssm_v_heads;   // ssm.time_step_rank
  int64_t ssm_head_dim;  // ssm.state_size; key and value heads share it
  int64_t n_expert;
  int64_t n_expert_used;
  int64_t n_ff_exp;
  int64_t n_ff_shexp;
};

constexpr uint32_t kFullAttentionInterval = 4;
constexpr int64_t kConvKernel = 4;
constexpr uint32_t kContextLength = 262144;

Qwen3NextShape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // No Qwen3-Next this small exists (the one release is 80B-A3B: 48 layers, hidden 2048,
    // 16 / 2 heads of 256, DeltaNet 16 key / 32 value heads of 128, 512 experts of 512,
    // top 10). This keeps its head sizes and ratios (value heads = 2 x key heads) on
    // Qwen3.5-0.8B's trunk: 24 layers, hidden 1024, 8 / 2 heads of 256, DeltaNet 8 key /
    // 16 value heads of 128, 32 experts of 256 (top 4) + a shared expert of 512: ~1.0 B.
    return {24, 1024, 8, 2, 256, 64, 8, 16, 128, 32, 4, 256, 512};
  }
  return {4, 128, 4, 2, 64, 16, 2, 4, 32, 8, 2, 64, 128};
}

void AddAttentionLayer(const Qwen3NextShape& s, int il, std::vector<TensorSpec>& t) {
  t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, 2 * s.head_dim * s.n_head));
  t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, s.head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, s.head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), s.head_dim * s.n_head, s.n_embd));
  t.push_back(NormWeight(LayerTensorName(il, "attn_q_norm.weight"), s.head_dim));
  t.push_back(NormWeight(LayerTensorName(il, "attn_k_norm.weight"), s.head_dim));
}

void AddDeltaNetLayer(const Qwen3NextShape& s, int il, std::vector<TensorSpec>& t) {
  const int64_t key_dim = s.ssm_head_dim * s.ssm_k_heads;
  const int64_t value_dim = s.ssm_head_dim * s.ssm_v_heads;
  const int64_t conv_dim = 2 * key_dim + value_dim;

  t.push_back(Matrix(LayerTensorName(il, "attn_qkv.weight"), s.n_embd, conv_dim));
  t.push_back(Matrix(LayerTensorName(il, "attn_gate.weight"), s.n_embd, value_dim));
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_conv1d.weight"), {kConvKernel, conv_dim},
                         DType::kF32,
                         Fill::Uniform(1.0f / std::sqrt(static_cast<float>(kConvKernel)))});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_dt.bias"), {s.ssm_v_heads}, DType::kF32,
                         Fill::Constant(1.0f)});
  // The decay spread of spec_qwen35.cc: some heads remember ~100 tokens, some ~1.
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_a"), {s.ssm_v_heads}, DType::kF32,
                         Fill::NegLogUniform(0.01f, 2.0f)});
  t.push_back(Matrix(LayerTensorName(il, "ssm_ba.weight"), s.n_embd, 2 * s.ssm_v_heads));
  t.push_back(NormWeight(LayerTensorName(il, "ssm_norm.weight"), s.ssm_head_dim));
  t.push_back(Matrix(LayerTensorName(il, "ssm_out.weight"), value_dim, s.n_embd));
}

}  // namespace

ModelSpec DescribeQwen3Next(Preset preset, int64_t n_vocab) {
  const Qwen3NextShape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  ModelSpec m;
  m.arch = "qwen3next";
  m.u32_keys = {
      {"context_length", kContextLength},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      // Unused by the graph (every FFN is MoE); the converter writes the config's value.
      {"feed_forward_length", u32(4 * s.n_embd)},
      {"attention.head_count", u32(s.n_head)},
      {"attention.head_count_kv", u32(s.n_head_kv)},
      {"attention.key_length", u32(s.head_dim)},
      {"attention.value_length", u32(s.head_dim)},
      {"rope.dimension_count", u32(s.n_rot)},
      {"expert_count", u32(s.n_expert)},
      {"expert_used_count", u32(s.n_expert_used)},
      {"expert_feed_forward_length", u32(s.n_ff_exp)},
      {"expert_shared_feed_forward_length", u32(s.n_ff_shexp)},
      {"ssm.conv_kernel", u32(kConvKernel)},
      {"ssm.state_size", u32(s.ssm_head_dim)},
      {"ssm.group_count", u32(s.ssm_k_heads)},
      {"ssm.time_step_rank", u32(s.ssm_v_heads)},
      {"ssm.inner_size", u32(s.ssm_head_dim * s.ssm_v_heads)},
      {"full_attention_interval", kFullAttentionInterval},
  };
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-6f},
      {"rope.freq_base", 1e7f},
  };

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  for (int il = 0; il < s.n_layer; ++il) {
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    if ((il + 1) % static_cast<int>(kFullAttentionInterval) == 0) {
      AddAttentionLayer(s, il, t);
    } else {
      AddDeltaNetLayer(s, il, t);
    }
    t.push_back(NormWeight(LayerTensorName(il, "post_attention_norm.weight"), s.n_embd));
    AddSharedExpertMoe(il, s.n_embd, s.n_expert, s.n_ff_exp, s.n_ff_shexp, t);
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  return m;
}

}  // namespace hearth::mkmodel
