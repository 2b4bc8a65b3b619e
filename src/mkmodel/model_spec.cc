#include "mkmodel/model_spec.h"

#include <cmath>
#include <cstdio>

namespace hearth::mkmodel {

Fill Fill::Uniform(float std) {
  // A uniform on [-h, h) has standard deviation h / sqrt(3).
  const float h = std * std::sqrt(3.0f);
  return {Kind::kUniform, -h, h};
}

int64_t TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

uint64_t ModelSpec::NumParameters() const {
  uint64_t n = 0;
  for (const TensorSpec& t : tensors) n += static_cast<uint64_t>(t.NumElements());
  return n;
}

ModelSpec DescribeModel(Arch arch, Preset preset, int64_t n_vocab) {
  switch (arch) {
    case Arch::kQwen35: return DescribeQwen35(/*moe=*/false, preset, n_vocab);
    case Arch::kQwen35Moe: return DescribeQwen35(/*moe=*/true, preset, n_vocab);
    case Arch::kQwen3: return DescribeQwen3(preset, n_vocab);
    case Arch::kQwen3Next: return DescribeQwen3Next(preset, n_vocab);
    case Arch::kGemma4: return DescribeGemma4(preset, n_vocab);
    case Arch::kGraniteHybrid: return DescribeGraniteHybrid(preset, n_vocab);
    case Arch::kGptOss: return DescribeGptOss(preset, n_vocab);
  }
  return DescribeQwen3(preset, n_vocab);  // unreachable: every enumerator is handled
}

std::optional<VocabEdit> DescribeVocabEdit(Arch arch) {
  if (arch == Arch::kGraniteHybrid) return DescribeGraniteVocab();
  if (arch == Arch::kGptOss) return DescribeGptOssVocab();
  return std::nullopt;
}

TensorSpec Matrix(std::string name, int64_t n_in, int64_t n_out, int64_t n_expert) {
  TensorSpec t;
  t.name = std::move(name);
  t.ne = {n_in, n_out};
  if (n_expert > 1) t.ne.push_back(n_expert);
  t.type = DType::kF16;
  t.fill = Fill::Uniform(1.0f / std::sqrt(static_cast<float>(n_in)));
  return t;
}

TensorSpec TokenEmbedding(int64_t n_embd, int64_t n_vocab) {
  TensorSpec t = Matrix("token_embd.weight", n_embd, n_vocab);
  t.fill = Fill::Uniform(3.0f / std::sqrt(static_cast<float>(n_embd)));
  return t;
}

void AddDenseFfn(int il, int64_t n_embd, int64_t n_ff, std::vector<TensorSpec>& t) {
  t.push_back(Matrix(LayerTensorName(il, "ffn_gate.weight"), n_embd, n_ff));
  t.push_back(Matrix(LayerTensorName(il, "ffn_up.weight"), n_embd, n_ff));
  t.push_back(Matrix(LayerTensorName(il, "ffn_down.weight"), n_ff, n_embd));
}

void AddSharedExpertMoe(int il, int64_t n_embd, int64_t n_expert, int64_t n_ff_exp,
                        int64_t n_ff_shexp, std::vector<TensorSpec>& t) {
  // The router and the shared-expert gate stay F32, as the converters keep them.
  TensorSpec router = Matrix(LayerTensorName(il, "ffn_gate_inp.weight"), n_embd, n_expert);
  router.type = DType::kF32;
  t.push_back(router);
  t.push_back(Matrix(LayerTensorName(il, "ffn_gate_exps.weight"), n_embd, n_ff_exp, n_expert));
  t.push_back(Matrix(LayerTensorName(il, "ffn_up_exps.weight"), n_embd, n_ff_exp, n_expert));
  t.push_back(Matrix(LayerTensorName(il, "ffn_down_exps.weight"), n_ff_exp, n_embd, n_expert));

  TensorSpec shared_gate = Matrix(LayerTensorName(il, "ffn_gate_inp_shexp.weight"), n_embd, 1);
  shared_gate.ne = {n_embd};
  shared_gate.type = DType::kF32;
  t.push_back(shared_gate);
  t.push_back(Matrix(LayerTensorName(il, "ffn_gate_shexp.weight"), n_embd, n_ff_shexp));
  t.push_back(Matrix(LayerTensorName(il, "ffn_up_shexp.weight"), n_embd, n_ff_shexp));
  t.push_back(Matrix(LayerTensorName(il, "ffn_down_shexp.weight"), n_ff_shexp, n_embd));
}

TensorSpec NormWeight(std::string name, int64_t n) {
  // Stored as the multiplier itself: the converters fold Qwen's zero-centred (1 + w)
  // norms into the file, so an untrained norm is all ones.
  return TensorSpec{std::move(name), {n}, DType::kF32, Fill::Constant(1.0f)};
}

std::string LayerTensorName(int il, const char* suffix) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "blk.%d.%s", il, suffix);
  return buf;
}

}  // namespace hearth::mkmodel
