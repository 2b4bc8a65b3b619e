// Gemma 4, the dense variant (gemma4, like gemma-4-31B), as llama.cpp's src/models/gemma4.cpp
// loads it and conversion/gemma.py (Gemma4Model) writes real checkpoints.
//
// What the loader and graph expect, and how this file meets it:
//   - Sliding-window layers interleaved with global ones: attention.sliding_window_pattern
//     is a bool per layer (true: sliding), as the converter writes layer_types; here the
//     31B's rhythm, every sixth layer global, shortened for the tiny preset so that its
//     four layers still hold both kinds (three sliding, then one global).
//   - The two kinds have their own head sizes (key_length / value_length for global
//     layers, the *_swa keys for sliding ones), their own KV head counts
//     (attention.head_count_kv as a per-layer array) and RoPE: rope.dimension_count{,_swa},
//     rope.freq_base{,_swa}. Global layers also read rope_freqs (one tensor of head_dim / 2
//     frequency factors, shared): the converter writes 1 for rotated pairs and 1e30 for the
//     ones "proportional" RoPE leaves alone; all ones here (every pair rotated).
//   - Keys the loader requires even when unused: embedding_length_per_layer_input (0: no
//     per-layer embeddings, those are E2B/E4B's) and attention.shared_kv_layers (0).
//   - Every layer: q/k RMS norms, post-attention and post-FFN norms, GELU-gated FFN; norms
//     are stored as the multiplier (Gemma 4's converter adds no offset), so ones.
//   - Tied embeddings; final logits soft-capped at 30 as in the released models.
#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {
namespace {

struct Gemma4Shape {
  int n_layer;
  int global_every;  // layer il is global when (il + 1) % global_every == 0
  int64_t n_embd;
  int64_t n_ff;
  int64_t n_head;
  int64_t n_head_kv_swa;
  int64_t n_head_kv_global;
  int64_t head_dim_swa;
  int64_t head_dim_global;
  uint32_t sliding_window;
};

constexpr uint32_t kContextLength = 262144;

Gemma4Shape ShapeFor(Preset preset) {
  if (preset == Preset::kSmall) {
    // Gemma 4's smallest dense releases (E2B, E4B) add per-layer embeddings and shared KV
    // layers; this is the 31B's layout scaled down instead: 18 layers (5 sliding : 1
    // global), hidden 1024, 8 heads, sliding layers 4 KV heads of 256 over a window of
    // 512 (E2B's), global layers 1 KV head of 512, FFN 4096: ~0.62 B, over a third of it
    // the 262k vocab's embedding.
    return {18, 6, 1024, 4096, 8, 4, 1, 256, 512, 512};
  }
  // A window of 32: shorter than the tests' prompts, so a resume that ignored the window
  // (trimmed the sliding layers' KV back past what they still hold) would show.
  return {4, 4, 128, 256, 4, 2, 1, 32, 64, 32};
}

bool IsGlobal(const Gemma4Shape& s, int il) { return (il + 1) % s.global_every == 0; }

}  // namespace

ModelSpec DescribeGemma4(Preset preset, int64_t n_vocab) {
  const Gemma4Shape s = ShapeFor(preset);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  ModelSpec m;
  m.arch = "gemma4";
  m.u32_keys = {
      {"context_length", kContextLength},
      {"embedding_length", u32(s.n_embd)},
      {"block_count", u32(s.n_layer)},
      {"feed_forward_length", u32(s.n_ff)},
      {"attention.head_count", u32(s.n_head)},
      {"attention.key_length", u32(s.head_dim_global)},
      {"attention.value_length", u32(s.head_dim_global)},
      {"attention.key_length_swa", u32(s.head_dim_swa)},
      {"attention.value_length_swa", u32(s.head_dim_swa)},
      {"attention.sliding_window", s.sliding_window},
      {"attention.shared_kv_layers", 0},
      {"embedding_length_per_layer_input", 0},
      {"rope.dimension_count", u32(s.head_dim_global)},
      {"rope.dimension_count_swa", u32(s.head_dim_swa)},
  };
  m.f32_keys = {
      {"attention.layer_norm_rms_epsilon", 1e-6f},
      {"rope.freq_base", 1e6f},
      {"rope.freq_base_swa", 1e4f},
      {"final_logit_softcapping", 30.0f},
  };
  std::vector<bool> sliding;
  std::vector<int32_t> n_head_kv;
  for (int il = 0; il < s.n_layer; ++il) {
    sliding.push_back(!IsGlobal(s, il));
    n_head_kv.push_back(static_cast<int32_t>(IsGlobal(s, il) ? s.n_head_kv_global : s.n_head_kv_swa));
  }
  m.bool_array_keys = {{"attention.sliding_window_pattern", sliding}};
  m.i32_array_keys = {{"attention.head_count_kv", n_head_kv}};

  std::vector<TensorSpec>& t = m.tensors;
  t.push_back(TokenEmbedding(s.n_embd, n_vocab));
  t.push_back(TensorSpec{"rope_freqs.weight", {s.head_dim_global / 2}, DType::kF32, Fill::Constant(1.0f)});
  for (int il = 0; il < s.n_layer; ++il) {
    const int64_t head_dim = IsGlobal(s, il) ? s.head_dim_global : s.head_dim_swa;
    const int64_t n_kv = IsGlobal(s, il) ? s.n_head_kv_global : s.n_head_kv_swa;
    t.push_back(NormWeight(LayerTensorName(il, "attn_norm.weight"), s.n_embd));
    t.push_back(Matrix(LayerTensorName(il, "attn_q.weight"), s.n_embd, head_dim * s.n_head));
    t.push_back(Matrix(LayerTensorName(il, "attn_k.weight"), s.n_embd, head_dim * n_kv));
    t.push_back(Matrix(LayerTensorName(il, "attn_v.weight"), s.n_embd, head_dim * n_kv));
    t.push_back(Matrix(LayerTensorName(il, "attn_output.weight"), head_dim * s.n_head, s.n_embd));
    t.push_back(NormWeight(LayerTensorName(il, "attn_q_norm.weight"), head_dim));
    t.push_back(NormWeight(LayerTensorName(il, "attn_k_norm.weight"), head_dim));
    t.push_back(NormWeight(LayerTensorName(il, "post_attention_norm.weight"), s.n_embd));
    t.push_back(NormWeight(LayerTensorName(il, "ffn_norm.weight"), s.n_embd));
    AddDenseFfn(il, s.n_embd, s.n_ff, t);
    t.push_back(NormWeight(LayerTensorName(il, "post_ffw_norm.weight"), s.n_embd));
  }
  t.push_back(NormWeight("output_norm.weight", s.n_embd));
  return m;
}

}  // namespace hearth::mkmodel
