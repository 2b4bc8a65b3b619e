// Granite 4.0 hybrid (granitehybrid), dense: as llama.cpp's src/models/granite-hybrid.cpp
// loads it and conversion/granite.py (GraniteHybridModel) writes real checkpoints.
//
// Mamba-2 layers with an attention layer among them, what the loader and graph hold to:
//   - A layer is recurrent iff attention.head_count_kv is 0 there, so head_count_kv is a
//     per-layer array (the converter writes the config's KV heads on attention layers).
//   - Mamba-2 mixer: ssm_in {n_embd, 2 * d_inner + 2 * n_group * d_state + n_heads}
//     projects z, x, B, C and dt at once; d_inner must be 2 * n_embd (the loader asserts
//     an expansion factor of 2); ssm.time_step_rank is the number of SSM heads, so the
//     head size is d_inner / n_heads; ssm_conv1d {conv_kernel, d_inner + 2 * n_group *
//     d_state} with a bias (the graph adds it unconditionally); ssm_a and ssm_d {1, heads}
//     (no ".weight": A holds -exp(A_log)); ssm_norm {d_inner / n_group, n_group}, the
//     grouped RMS norm before ssm_out.
//   - Attention layers have no RoPE (Granite 4.0's are NoPE): rope.scaling.finetuned is
//     false, which the loader reads as "no RoPE on any layer", and the context length is
//     the converter's 2^20. Separate q/k/v, no q/k norms, no biases.
//   - Granite's muP multipliers (embedding 12, residual 0.22, attention 1 / head_dim,
//     optional keys) are left out: over untrained weights the first two make the input
//     token dwarf every layer's output, and the model only echoes or loops on it (greedy
//     replies of one repeated token), so a wrong recurrent state would hardly move the
//     logits the tests compare.
//   - Dense FFN (SwiGLU, ffn_gate/up/down) after every layer, pre-normed by ffn_norm; the
//     MoE variants (Granite 4.0-H-Tiny / -Small) are not written.
//   - Tied embeddings (output.weight is optional), as the small Granite 4.0-H models tie.
#include <cmath>

#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct GraniteHybridShape {
  int n_layer;
  int attention_period;  // layer il is attention iff il % period == period - 1
  int64_t n_embd;
  int64_t n_ff;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t ssm_heads;  // ssm.time_step_rank; head size d_inner / ssm_heads
  int64_t ssm_state;  // ssm.state_size
  int64_t ssm_groups;
};

constexpr int64_t kConvKernel = 4;
constexpr uint32_t kContextLength = 1u << 20;

GraniteHybridShape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // Granite-4.0-H-350M's trunk: hidden 768, 32 layers (4 of them attention, 12 query /
    // 4 KV heads of 64), Mamba-2 with d_inner 1536 in 48 heads of 32, state 128, one
    // group, SwiGLU FFN of 2048. Its attention layers sit at the checkpoint's own
    // indices; here every eighth layer. ~0.36 B parameters with the 128k vocab.
    return {32, 8, 768, 2048, 12, 4, 48, 128, 1};
  }
  // One attention layer in four: two heads of 64 query, one KV.
  return {4, 4, 128, 256, 2, 1, 8, 16, 1};
}

bool IsAttentionLayer(const GraniteHybridShape& s, int il) {
  return il % s.attention_period == s.attention_period - 1;
}

void AddMamba2Layer(const GraniteHybridShape& s, int il, std::vector<TensorSpec>& t) {
  const int64_t d_inner = 2 * s.n_embd;
  const int64_t conv_dim = d_inner + 2 * s.ssm_groups * s.ssm_state;
  const int64_t d_in_proj = d_inner + conv_dim + s.ssm_heads;

  t.push_back(Matrix(LayerTensorName(il, "ssm_in.weight"), s.n_embd, d_in_proj));
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_conv1d.weight"), {kConvKernel, conv_dim},
                         DType::kF32,
                         Fill::Uniform(1.0f / std::sqrt(static_cast<float>(kConvKernel)))});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_conv1d.bias"), {conv_dim}, DType::kF32,
                         Fill::Constant(0.0f)});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_dt.bias"), {s.ssm_heads}, DType::kF32,
                         Fill::Constant(1.0f)});
  // Decay spread over decades as in spec_qwen35.cc: some heads remember ~100 tokens,
  // some ~1, so a resumed state that were off would show in the logits.
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_a"), {1, s.ssm_heads}, DType::kF32,
                         Fill::NegLogUniform(0.01f, 2.0f)});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_d"), {1, s.ssm_heads}, DType::kF32,
                         Fill::Constant(1.0f)});
  t.push_back(TensorSpec{LayerTensorName(il, "ssm_norm.weight"), {d_inner / s.ssm_groups, s.ssm_groups},
                         DType::kF32, Fill::Constant(1.0f)});
  t.push_back(Matrix(LayerTensorName(il, "ssm_out.weight"), d_inner, s.n_embd));
}

void AddAttentionLayer(const GraniteHybridShape& s, int il, std::vector<TensorSpec>& t) {
  const int64_t head_dim = s.n_embd / s.n_head;
  t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, head_dim * s.n_head));
  t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, head_dim * s.n_head_kv));
  t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), head_dim * s.n_head, s.n_embd));
}

}  // namespace

ModelSpec DescribeGraniteHybrid(Preset preset, int64_t n_vocab) {
  const GraniteHybridShape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  std::vector<int32_t> n_head_kv;
  for (int il = 0; il < s.n_layer; ++il) {
    n_head_kv.push_back(IsAttentionLayer(s, il) ? static_cast<int32_t>(s.n_head_kv) : 0);
  }

  ModelSpec m;
  m.arch = "granitehybrid";
  m.u32_keys = {
      {"context_length", kContextLength},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      {"feed_forward_length", u32(s.n_ff)},
      {"attention.head_count", u32(s.n_head)},
      {"ssm.conv_kernel", u32(kConvKernel)},
      {"ssm.state_size", u32(s.ssm_state)},
      {"ssm.group_count", u32(s.ssm_groups)},
      {"ssm.inner_size", u32(2 * s.n_embd)},
      {"ssm.time_step_rank", u32(s.ssm_heads)},
  };
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-5f},
  };
  m.i32_array_keys = {{"attention.head_count_kv", n_head_kv}};
  m.bool_keys = {{"rope.scaling.finetuned", false}};

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  for (int il = 0; il < s.n_layer; ++il) {
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    if (IsAttentionLayer(s, il)) {
      AddAttentionLayer(s, il, t);
    } else {
      AddMamba2Layer(s, il, t);
    }
    t.push_back(NormWeight(LayerTensorName(il, "ffn_norm.weight"), s.n_embd));
    AddDenseFfn(il, s.n_embd, s.n_ff, t);
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  return m;
}

VocabEdit DescribeGraniteVocab() {
  // Granite 4.0's tokenizer is a 100k cl100k-style BPE, which no vocab llama.cpp ships;
  // llama 3's (ggml-vocab-llama-bpe.gguf) splits text with the same regex. "dbrx" names
  // that regex without llama 3's forced BOS: Granite's prompts carry none. The markers
  // are the ones ibm-granite-granite-4.0.jinja emits; the tool tags are single tokens
  // that read as text, so the chat parser sees them in the output.
  VocabEdit e;
  e.pre = "dbrx";
  e.tokens = {{"<|end_of_text|>"},        {"<|start_of_role|>"},      {"<|end_of_role|>"},
              {"<tool_call>", false},     {"</tool_call>", false},    {"<tool_response>", false},
              {"</tool_response>", false}};
  e.bos = "<|end_of_text|>";
  e.eos = "<|end_of_text|>";
  e.add_bos = false;
  return e;
}

}  // namespace hearth::mkmodel
