// Internal to mkmodel: what a model file holds, before any byte is written.
//
// A ModelSpec lists the architecture's hparam keys and every tensor with its shape, type
// and how to fill it. The spec_*.cc files build one per architecture from what llama.cpp's
// loader requires (src/models/<arch>.cpp: load_arch_hparams, load_arch_tensors) and how
// convert_hf_to_gguf.py writes real checkpoints of the family; tensor_writer.cc turns the
// fill rules into bytes.
//
// Shapes are in ggml order: ne[0] is the contiguous (input) dimension, so a matrix that
// maps n_embd to n_ff is {n_embd, n_ff}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mkmodel/mkmodel.h"

namespace hearth::mkmodel {

enum class DType { kF32, kF16 };

// How a tensor's elements are drawn. All draws come from one seeded stream per tensor.
struct Fill {
  enum class Kind {
    kConstant,       // every element is a
    kUniform,        // uniform in [a, b)
    kNegLogUniform,  // -exp(u), u uniform in [log a, log b): decay rates spread over decades
  };
  Kind kind = Kind::kConstant;
  float a = 0.0f;
  float b = 0.0f;

  static Fill Constant(float v) { return {Kind::kConstant, v, v}; }
  // Zero-mean uniform with standard deviation `std`.
  static Fill Uniform(float std);
  // REQUIRES: 0 < lo < hi.
  static Fill NegLogUniform(float lo, float hi) { return {Kind::kNegLogUniform, lo, hi}; }
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // 1 to 4 dimensions
  DType type = DType::kF32;
  Fill fill;

  int64_t NumElements() const;
};

struct ModelSpec {
  std::string arch;  // general.architecture; also the prefix of the hparam keys
  // Hparam keys, each written as "<arch>.<key>".
  std::vector<std::pair<std::string, uint32_t>> u32_keys;
  std::vector<std::pair<std::string, float>> f32_keys;
  std::vector<std::pair<std::string, std::vector<int32_t>>> i32_array_keys;
  std::vector<std::pair<std::string, std::vector<bool>>> bool_array_keys;
  std::vector<std::pair<std::string, bool>> bool_keys;
  std::vector<TensorSpec> tensors;

  uint64_t NumParameters() const;
};

// The change a family's tokenizer needs when no vocab llama.cpp ships carries the special
// tokens its chat template emits: a shipped vocab of the same pre-tokenizer family, with
// those tokens written over its control tokens (vocab_edit.h applies it).
struct SpecialToken {
  std::string text;
  // Control tokens are markers, left out of detokenized text unless asked for;
  // user-defined ones (Qwen's <tool_call>) are single tokens that read as their text.
  bool control = true;
};
struct VocabEdit {
  std::string pre;                    // tokenizer.ggml.pre to write; empty: keep the vocab's
  std::vector<SpecialToken> tokens;   // take the ids of the vocab's control tokens, in order
  std::string bos;                    // the text of the BOS token
  std::string eos;                    // the text of the EOS token (may be the BOS one)
  bool add_bos = false;               // tokenizer.ggml.add_bos_token
};

// REQUIRES: n_vocab > 0 (the size of the tokenizer the file will carry).
ModelSpec DescribeModel(Arch arch, Preset preset, int64_t n_vocab);

// Per family; DescribeModel dispatches here.
ModelSpec DescribeQwen35(bool moe, Preset preset, int64_t n_vocab);
ModelSpec DescribeQwen3(Preset preset, int64_t n_vocab);
ModelSpec DescribeQwen3Next(Preset preset, int64_t n_vocab);
ModelSpec DescribeGemma4(Preset preset, int64_t n_vocab);
ModelSpec DescribeGraniteHybrid(Preset preset, int64_t n_vocab);
ModelSpec DescribeGptOss(Preset preset, int64_t n_vocab);
// nullopt: the vocab DefaultFiles names is the family's own, copied as it is.
std::optional<VocabEdit> DescribeVocabEdit(Arch arch);
VocabEdit DescribeGraniteVocab();
VocabEdit DescribeGptOssVocab();

// Helpers shared by the spec_*.cc files.
// A weight matrix mapping n_in to n_out (or a stack of n_expert of them), F16, with the
// usual 1/sqrt(fan_in) scale.
TensorSpec Matrix(std::string name, int64_t n_in, int64_t n_out, int64_t n_expert = 1);
// token_embd {n_embd, n_vocab}, F16, also the (tied) LM head. Scaled so logits over the
// normalized final hidden state have a standard deviation of 3: the gap between the top
// two logits is then ~0.6 on average, so greedy decoding rarely hinges on rounding, while
// sampling at temperature 1 still spreads over many tokens.
TensorSpec TokenEmbedding(int64_t n_embd, int64_t n_vocab);
// Routed experts (router, gate / up / down stacks) and a sigmoid-gated shared expert, the
// FFN of Qwen's MoE families: tensors ffn_gate_inp, ffn_{gate,up,down}_exps,
// ffn_gate_inp_shexp, ffn_{gate,up,down}_shexp of layer il.
void AddSharedExpertMoe(int il, int64_t n_embd, int64_t n_expert, int64_t n_ff_exp,
                        int64_t n_ff_shexp, std::vector<TensorSpec>& t);
// A SwiGLU FFN: ffn_gate and ffn_up {n_embd -> n_ff}, ffn_down {n_ff -> n_embd} of layer il.
void AddDenseFfn(int il, int64_t n_embd, int64_t n_ff, std::vector<TensorSpec>& t);
// A norm's weight: F32, all ones.
TensorSpec NormWeight(std::string name, int64_t n);
// "blk.<il>.<suffix>"
std::string LayerTensorName(int il, const char* suffix);

}  // namespace hearth::mkmodel
