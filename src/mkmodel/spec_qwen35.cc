// Qwen3.5 (qwen35) and Qwen3.5-MoE (qwen35moe), as llama.cpp's src/models/qwen35.cpp and
// qwen35moe.cpp load them.
//
// Layer il is full attention when (il + 1) % full_attention_interval == 0, else Gated
// DeltaNet. What the loader and graph expect, and how this file meets it:
//   - Attention layers: attn_q projects to query and output gate interleaved per head
//     ({n_embd, 2 * head_dim * n_head}); q/k RMS norms; interleaved M-RoPE over
//     rope.dimension_count dims, split by rope.dimension_sections (which must sum to half
//     the rotated dims).
//   - DeltaNet layers: attn_qkv = [q | k | v] with key_dim = state_size * group_count and
//     value_dim = state_size * time_step_rank; the graph takes head_v_dim as
//     inner_size / time_step_rank, the loader as state_size, so inner_size is written as
//     state_size * time_step_rank. time_step_rank (value heads) must be a multiple of
//     group_count (key heads).
//   - ssm_a holds -exp(A_log) (negative: the per-token decay is exp(softplus(.) * ssm_a)),
//     ssm_dt.bias is dt_bias (ones, as Qwen initializes it), ssm_conv1d is squeezed to
//     {conv_kernel, conv_dim} and kept F32 like the converter keeps it.
//   - Tied embeddings: no output.weight; the loader falls back to token_embd.
#include <cmath>

#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct Qwen35Shape {
  int n_layer;
  int64_t n_embd;
  int64_t n_ff;  // dense FFN width
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t n_rot;  // a quarter of head_dim (partial_rotary_factor 0.25)
  std::vector<int32_t> rope_sections;
  uint32_t full_attention_interval;
  int64_t ssm_conv_kernel;
  int64_t ssm_k_heads;   // ssm.group_count
  int64_t ssm_v_heads;   // ssm.time_step_rank
  int64_t ssm_head_dim;  // ssm.state_size; key and value heads share it
  uint32_t n_ctx_train;
  float rope_freq_base;
  // MoE only.
  int64_t n_expert;
  int64_t n_expert_used;
  int64_t n_ff_exp;
  int64_t n_ff_shexp;
};

Qwen35Shape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // Qwen3.5-0.8B: hidden 1024, 24 layers, 8 query / 2 KV heads of 256, intermediate 3584,
    // 16 key and 16 value DeltaNet heads of 128, conv kernel 4, rope theta 1e7.
    // The MoE variant keeps that trunk and swaps each FFN for 16 experts of 256 (top 4)
    // plus a shared expert of 512, about the same total size.
    return {24, 1024, 3584, 8, 2, 256, 64, {11, 11, 10, 0}, 4, 4, 16, 16, 128, 262144, 1e7f,
            16, 4, 256, 512};
  }
  // For tests: token_embd (n_vocab x 128, F16) is most of the file; the rest decodes in
  // well under a millisecond per token on one core. The family's training context, so a
  // server sized from the model (no --ctx-size) behaves as it would on a real one.
  return {4, 128, 256, 4, 2, 64, 16, {3, 3, 2, 0}, 4, 4, 2, 4, 32, 262144, 1e7f, 8, 2, 64, 128};
}

void AddAttentionLayer(const Qwen35Shape& s, int il, std::vector<TensorSpec>& t) {
  t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, 2 * s.head_dim * s.n_head));
  t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, s.head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, s.head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), s.head_dim * s.n_head, s.n_embd));
  t.push_back(NormWeight(LayerTensorName(il, "attn_q_norm.weight"), s.head_dim));
  t.push_back(NormWeight(LayerTensorName(il, "attn_k_norm.weight"), s.head_dim));
}

void AddDeltaNetLayer(const Qwen35Shape& s, int il, std::vector<TensorSpec>& t) {
  const int64_t key_dim = s.ssm_head_dim * s.ssm_k_heads;
  const int64_t value_dim = s.ssm_head_dim * s.ssm_v_heads;
  const int64_t conv_dim = 2 * key_dim + value_dim;

  t.push_back(Matrix(LayerTensorName(il, "attn_qkv.weight"), s.n_embd, conv_dim));
  t.push_back(Matrix(LayerTensorName(il, "attn_gate.weight"), s.n_embd, value_dim));
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_conv1d.weight"), {s.ssm_conv_kernel, conv_dim},
                         DType::kF32,
                         Fill::Uniform(1.0f / std::sqrt(static_cast<float>(s.ssm_conv_kernel)))});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_dt.bias"), {s.ssm_v_heads}, DType::kF32,
                         Fill::Constant(1.0f)});
  // Decay rates A in [0.01, 2): with softplus(1) ~ 1.3 the per-token decay spans
  // exp(-2.6) .. 0.987, so some heads remember ~100 tokens and some ~1.
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_a"), {s.ssm_v_heads}, DType::kF32,
                         Fill::NegLogUniform(0.01f, 2.0f)});
  t.push_back(Matrix(LayerTensorName(il, "ssm_beta.weight"), s.n_embd, s.ssm_v_heads));
  t.push_back(Matrix(LayerTensorName(il, "ssm_alpha.weight"), s.n_embd, s.ssm_v_heads));
  t.push_back(NormWeight(LayerTensorName(il, "ssm_norm.weight"), s.ssm_head_dim));
  t.push_back(Matrix(LayerTensorName(il, "ssm_out.weight"), value_dim, s.n_embd));
}

}  // namespace

ModelSpec DescribeQwen35(bool moe, Preset preset, int64_t n_vocab) {
  const Qwen35Shape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  ModelSpec m;
  m.arch = moe ? "qwen35moe" : "qwen35";
  m.u32_keys = {
      {"context_length", s.n_ctx_train},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      {"attention.head_count", u32(s.n_head)},
      {"attention.head_count_kv", u32(s.n_head_kv)},
      {"attention.key_length", u32(s.head_dim)},
      {"attention.value_length", u32(s.head_dim)},
      {"rope.dimension_count", u32(s.n_rot)},
      {"ssm.conv_kernel", u32(s.ssm_conv_kernel)},
      {"ssm.state_size", u32(s.ssm_head_dim)},
      {"ssm.group_count", u32(s.ssm_k_heads)},
      {"ssm.time_step_rank", u32(s.ssm_v_heads)},
      {"ssm.inner_size", u32(s.ssm_head_dim * s.ssm_v_heads)},
      {"full_attention_interval", s.full_attention_interval},
  };
  if (moe) {
    m.u32_keys.push_back({"expert_count", u32(s.n_expert)});
    m.u32_keys.push_back({"expert_used_count", u32(s.n_expert_used)});
    m.u32_keys.push_back({"expert_feed_forward_length", u32(s.n_ff_exp)});
    m.u32_keys.push_back({"expert_shared_feed_forward_length", u32(s.n_ff_shexp)});
  } else {
    m.u32_keys.push_back({"feed_forward_length", u32(s.n_ff)});
  }
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-6f},
      {"rope.freq_base", s.rope_freq_base},
  };
  m.i32_array_keys = {{"rope.dimension_sections", s.rope_sections}};

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  for (int il = 0; il < s.n_layer; ++il) {
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    if ((il + 1) % static_cast<int>(s.full_attention_interval) == 0) {
      AddAttentionLayer(s, il, t);
    } else {
      AddDeltaNetLayer(s, il, t);
    }
    t.push_back(NormWeight(LayerTensorName(il, "post_attention_norm.weight"), s.n_embd));
    if (moe) {
      AddSharedExpertMoe(il, s.n_embd, s.n_expert, s.n_ff_exp, s.n_ff_shexp, t);
    } else {
      AddDenseFfn(il, s.n_embd, s.n_ff, t);
    }
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  return m;
}

}  // namespace hearth::mkmodel
