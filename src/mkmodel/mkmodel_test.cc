#include "mkmodel/mkmodel.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/model.h"
#include "llama.h"
#include "mkmodel/model_spec.h"
#include "mkmodel/tensor_writer.h"
#include "testing/test_env.h"

namespace hearth::mkmodel {

// Names the parameter in test listings ("qwen35" rather than "4-byte object <00-00 00-00>").
void PrintTo(Arch arch, std::ostream* os) { *os << ArchName(arch); }

namespace {

Options TinyOptions(Arch arch, const std::string& out, uint64_t seed = 7) {
  Options o;
  o.arch = arch;
  o.preset = Preset::kTiny;
  o.seed = seed;
  const FamilyFiles files = DefaultFiles(arch);
  o.vocab_path = testing::LlamaModelsDir() + "/" + std::string(files.vocab);
  o.template_path = testing::LlamaModelsDir() + "/" + std::string(files.chat_template);
  o.out_path = out;
  return o;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class MkmodelArchTest : public ::testing::TestWithParam<Arch> {};

TEST(MkmodelTest, ParsesNamesItPrints) {
  for (Arch a : kAllArchs) {
    StatusOr<Arch> parsed = ParseArch(ArchName(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  for (Preset p : {Preset::kTiny, Preset::kSmall}) {
    StatusOr<Preset> parsed = ParsePreset(PresetName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(ParseArch("qwen2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePreset("huge").status().code(), StatusCode::kInvalidArgument);
}

TEST(MkmodelTest, HybridPutsFullAttentionOnEveryFourthLayer) {
  for (bool moe : {false, true}) {
    const ModelSpec spec = DescribeQwen35(moe, Preset::kTiny, 1000);
    std::set<std::string> names;
    for (const TensorSpec& t : spec.tensors) {
      EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
    }
    EXPECT_TRUE(names.count("blk.3.attn_q.weight"));
    EXPECT_TRUE(names.count("blk.3.attn_k_norm.weight"));
    EXPECT_FALSE(names.count("blk.3.ssm_a"));
    for (int il = 0; il < 3; ++il) {
      EXPECT_TRUE(names.count(LayerTensorName(il, "ssm_a")));
      EXPECT_TRUE(names.count(LayerTensorName(il, "attn_qkv.weight")));
      EXPECT_FALSE(names.count(LayerTensorName(il, "attn_q.weight")));
    }
    EXPECT_EQ(names.count("blk.0.ffn_gate_exps.weight"), moe ? 1u : 0u);
    EXPECT_EQ(names.count("blk.0.ffn_gate.weight"), moe ? 0u : 1u);
    EXPECT_FALSE(names.count("output.weight")) << "embeddings are tied";
  }
}

TEST(MkmodelTest, SmallPresetHasTheShapeOfQwen35_08B) {
  const ModelSpec spec = DescribeModel(Arch::kQwen35, Preset::kSmall, 248320);
  const uint64_t n = spec.NumParameters();
  EXPECT_GT(n, 700'000'000u);
  EXPECT_LT(n, 800'000'000u);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSpec& t : spec.tensors) shapes[t.name] = t.ne;
  EXPECT_EQ(shapes["blk.23.attn_q.weight"], (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(shapes["blk.0.attn_qkv.weight"], (std::vector<int64_t>{1024, 6144}));
  EXPECT_EQ(shapes["blk.0.ffn_down.weight"], (std::vector<int64_t>{3584, 1024}));
  EXPECT_EQ(shapes.count("blk.24.attn_norm.weight"), 0u);
}

TEST(MkmodelTest, Qwen3NextIsAllMoeWithFusedBetaAlpha) {
  const ModelSpec spec = DescribeModel(Arch::kQwen3Next, Preset::kTiny, 1000);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSpec& t : spec.tensors) {
    EXPECT_TRUE(shapes.emplace(t.name, t.ne).second) << "duplicate " << t.name;
  }
  for (int il = 0; il < 4; ++il) {
    EXPECT_TRUE(shapes.count(LayerTensorName(il, "ffn_gate_exps.weight"))) << il;
    EXPECT_FALSE(shapes.count(LayerTensorName(il, "ffn_gate.weight"))) << il;
  }
  // 4 value heads: beta and alpha, one each per head, in one projection.
  EXPECT_EQ(shapes["blk.0.ssm_ba.weight"], (std::vector<int64_t>{128, 8}));
  EXPECT_FALSE(shapes.count("blk.0.ssm_beta.weight"));
  EXPECT_EQ(shapes["blk.3.attn_q.weight"], (std::vector<int64_t>{128, 2 * 64 * 4}));
  EXPECT_FALSE(shapes.count("blk.3.ssm_ba.weight"));
  for (const auto& [key, values] : spec.i32_array_keys) {
    EXPECT_NE(key, "rope.dimension_sections") << "qwen3next uses NeoX RoPE, not M-RoPE";
  }
}

TEST(MkmodelTest, SmallQwen3NextHasAboutABillionParameters) {
  const ModelSpec spec = DescribeModel(Arch::kQwen3Next, Preset::kSmall, 151936);
  EXPECT_GT(spec.NumParameters(), 900'000'000u);
  EXPECT_LT(spec.NumParameters(), 1'100'000'000u);
}

TEST(MkmodelTest, Gemma4InterleavesSlidingAndGlobalLayers) {
  for (Preset preset : {Preset::kTiny, Preset::kSmall}) {
    const ModelSpec spec = DescribeModel(Arch::kGemma4, preset, 1000);
    ASSERT_EQ(spec.bool_array_keys.size(), 1u);
    EXPECT_EQ(spec.bool_array_keys[0].first, "attention.sliding_window_pattern");
    const std::vector<bool>& sliding = spec.bool_array_keys[0].second;
    const int n_global = static_cast<int>(std::count(sliding.begin(), sliding.end(), false));
    EXPECT_GT(n_global, 0);
    EXPECT_LT(n_global, static_cast<int>(sliding.size()) / 2 + 1) << "most layers slide";
    EXPECT_FALSE(sliding.back()) << "the last layer is global, as in the 31B";
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const TensorSpec& t : spec.tensors) shapes[t.name] = t.ne;
    // Global layers have the larger heads (twice the sliding ones', as in the 31B).
    const int last = static_cast<int>(sliding.size()) - 1;
    EXPECT_EQ(shapes[LayerTensorName(last, "attn_q_norm.weight")][0],
              2 * shapes["blk.0.attn_q_norm.weight"][0]);
  }
  EXPECT_EQ(DescribeModel(Arch::kGemma4, Preset::kTiny, 1000).bool_array_keys[0].second,
            (std::vector<bool>{true, true, true, false}));
}

// llama.cpp tells Granite's Mamba-2 layers from its attention layers by a zero KV head
// count; its attention layers take no RoPE.
TEST(MkmodelTest, GraniteHybridMarksMamba2LayersByZeroKvHeads) {
  const ModelSpec spec = DescribeModel(Arch::kGraniteHybrid, Preset::kTiny, 1000);
  ASSERT_EQ(spec.i32_array_keys.size(), 1u);
  EXPECT_EQ(spec.i32_array_keys[0].first, "attention.head_count_kv");
  EXPECT_EQ(spec.i32_array_keys[0].second, (std::vector<int32_t>{0, 0, 0, 1}));
  ASSERT_EQ(spec.bool_keys.size(), 1u);
  EXPECT_EQ(spec.bool_keys[0], (std::pair<std::string, bool>{"rope.scaling.finetuned", false}));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSpec& t : spec.tensors) {
    EXPECT_TRUE(shapes.emplace(t.name, t.ne).second) << "duplicate " << t.name;
  }
  // z and x (d_inner 256 each), B and C (one group of state 16 each), dt (8 heads).
  EXPECT_EQ(shapes["blk.0.ssm_in.weight"], (std::vector<int64_t>{128, 2 * 256 + 2 * 16 + 8}));
  EXPECT_EQ(shapes["blk.0.ssm_conv1d.weight"], (std::vector<int64_t>{4, 256 + 2 * 16}));
  EXPECT_EQ(shapes["blk.0.ssm_a"], (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(shapes["blk.2.ssm_norm.weight"], (std::vector<int64_t>{256, 1}));
  EXPECT_TRUE(shapes.count("blk.3.attn_q.weight"));
  EXPECT_FALSE(shapes.count("blk.3.ssm_in.weight"));
  EXPECT_FALSE(shapes.count("blk.0.attn_q.weight"));

  // The small preset: Granite-4.0-H-350M's trunk with the 128k vocab mkmodel gives it.
  const uint64_t n = DescribeModel(Arch::kGraniteHybrid, Preset::kSmall, 128256).NumParameters();
  EXPECT_GT(n, 300'000'000u);
  EXPECT_LT(n, 450'000'000u);
}

// gpt-oss: every layer attends (sliding or full, by llama.cpp's default period of two),
// with q/k/v and output biases, one sink per query head, biased experts and no shared
// one, and an LM head of its own.
TEST(MkmodelTest, GptOssHasSinksBiasedExpertsAndAnUntiedHead) {
  const ModelSpec spec = DescribeModel(Arch::kGptOss, Preset::kTiny, 1000);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSpec& t : spec.tensors) {
    EXPECT_TRUE(shapes.emplace(t.name, t.ne).second) << "duplicate " << t.name;
  }
  for (int il = 0; il < 4; ++il) {
    EXPECT_EQ(shapes[LayerTensorName(il, "attn_sinks.weight")], (std::vector<int64_t>{4})) << il;
    EXPECT_EQ(shapes[LayerTensorName(il, "ffn_gate_exps.bias")], (std::vector<int64_t>{128, 4})) << il;
    EXPECT_TRUE(shapes.count(LayerTensorName(il, "attn_q.bias"))) << il;
    EXPECT_FALSE(shapes.count(LayerTensorName(il, "ffn_gate_shexp.weight"))) << il;
  }
  EXPECT_EQ(shapes["blk.0.ffn_down_exps.bias"], (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(shapes["blk.0.attn_q.weight"], (std::vector<int64_t>{64, 4 * 32}));
  EXPECT_EQ(shapes["output.weight"], (std::vector<int64_t>{64, 1000}));
  for (const auto& [key, values] : spec.bool_array_keys) {
    EXPECT_NE(key, "attention.sliding_window_pattern") << "as the converter: the loader's default";
  }

  const uint64_t n = DescribeModel(Arch::kGptOss, Preset::kSmall, 128256).NumParameters();
  EXPECT_GT(n, 600'000'000u);
  EXPECT_LT(n, 750'000'000u);
}

TEST(MkmodelTest, DrawsAreSeededFiniteAndInRange) {
  const TensorSpec m = Matrix("blk.0.ffn_up.weight", 64, 32);
  const TensorSpec decay{"blk.0.ssm_a", {4096}, DType::kF32, Fill::NegLogUniform(0.01f, 2.0f)};
  std::vector<float> a(4096), b(4096), c(4096);
  DrawValues(m, 1, a.data(), a.size());
  DrawValues(m, 1, b.data(), b.size());
  DrawValues(m, 2, c.data(), c.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum_sq = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += double(v) * v;
  }
  EXPECT_NEAR(std::sqrt(sum_sq / double(a.size())), 1.0 / 8.0, 0.01);  // std = 1/sqrt(fan_in)

  DrawValues(decay, 1, a.data(), a.size());
  for (float v : a) {
    EXPECT_LE(v, -0.01f);
    EXPECT_GE(v, -2.0f);
  }
}

TEST_P(MkmodelArchTest, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string dir = testing::MakeTempDir();
  const std::string a = dir + "/a.gguf", b = dir + "/b.gguf", c = dir + "/c.gguf";
  StatusOr<WriteSummary> sa = WriteModelWithSummary(TinyOptions(GetParam(), a, 7));
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  ASSERT_TRUE(WriteModel(TinyOptions(GetParam(), b, 7)).ok());
  ASSERT_TRUE(WriteModel(TinyOptions(GetParam(), c, 8)).ok());
  EXPECT_EQ(sa->n_bytes, std::filesystem::file_size(a));
  const std::string bytes_a = ReadAll(a);
  EXPECT_TRUE(bytes_a == ReadAll(b)) << "same seed, different files";
  EXPECT_FALSE(bytes_a == ReadAll(c)) << "different seeds, same file";
  // Only the three models: no temp files left behind.
  int n_files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n_files;
  EXPECT_EQ(n_files, 3);
}

// llama.cpp's own tool, built from the same source as the libllama hearth links, is the
// judge of the format: it must load the file and generate.
TEST_P(MkmodelArchTest, LlamaCompletionLoadsAndGenerates) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/tiny.gguf";
  ASSERT_TRUE(WriteModel(TinyOptions(GetParam(), path)).ok());
  // One thread: OpenMP's spinning workers slow to a crawl when the test machine's other
  // core is busy.
  const CommandResult r = RunCommand(testing::LlamaBinDir() + "/llama-completion -m " + path +
                                     " -p hello -n 8 -no-cnv --temp 0 -t 1 -c 512 --no-warmup");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The perf summary ends with "eval time = X ms / N runs", one run per generated token.
  std::smatch m;
  const std::regex eval_runs(R"(\beval time =\s+[0-9.]+ ms /\s+([0-9]+) runs)");
  ASSERT_TRUE(std::regex_search(r.output, m, eval_runs)) << r.output;
  EXPECT_GE(std::stoi(m[1].str()), 7) << r.output;
}

// Finite logits that depend on the input, over a 256-token prompt and 128 single-token
// decodes (the recurrent layers' state must not blow up).
TEST_P(MkmodelArchTest, LogitsStayFiniteAndVaried) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/tiny.gguf";
  ASSERT_TRUE(WriteModel(TinyOptions(GetParam(), path)).ok());

  engine::InitBackend(/*verbose=*/false);
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  ASSERT_NE(model, nullptr);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 256;
  cp.n_ubatch = 256;
  cp.n_threads = 1;
  cp.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(model, cp);
  ASSERT_NE(ctx, nullptr);
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  std::vector<llama_token> prompt(256);
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<llama_token>((i * 7919) % 50000);
  }
  ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))), 0);

  std::set<llama_token> argmaxes;
  llama_token next = 0;
  for (int step = 0; step < 128; ++step) {
    const float* logits = llama_get_logits_ith(ctx, -1);
    ASSERT_NE(logits, nullptr);
    float lo = logits[0], hi = logits[0];
    for (int32_t t = 0; t < n_vocab; ++t) {
      ASSERT_TRUE(std::isfinite(logits[t])) << "step " << step << " token " << t;
      if (logits[t] > hi) {
        hi = logits[t];
        next = t;
      }
      lo = std::min(lo, logits[t]);
    }
    ASSERT_GT(hi - lo, 1.0f) << "logits nearly constant at step " << step;
    argmaxes.insert(next);
    // Feed varied tokens so the check covers many inputs, not one greedy loop.
    llama_token in = static_cast<llama_token>((step * 104729 + next) % n_vocab);
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(&in, 1)), 0);
  }
  EXPECT_GT(argmaxes.size(), 10u) << "the output barely depends on the input";
  llama_free(ctx);
  llama_model_free(model);
}

INSTANTIATE_TEST_SUITE_P(AllArchs, MkmodelArchTest, ::testing::ValuesIn(kAllArchs),
                         [](const ::testing::TestParamInfo<Arch>& p) {
                           return testing::TestParamName(ArchName(p.param));
                         });

TEST(MkmodelTest, MissingVocabIsNotFoundAndLeavesOldFileAlone) {
  const std::string dir = testing::MakeTempDir();
  const std::string out = dir + "/model.gguf";
  { std::ofstream(out) << "old"; }
  Options o = TinyOptions(Arch::kQwen35, out);
  o.vocab_path = dir + "/no-such-vocab.gguf";
  const Status s = WriteModel(o);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no-such-vocab.gguf"), std::string::npos) << s.message();
  EXPECT_EQ(ReadAll(out), "old");
}

TEST(MkmodelTest, VocabThatIsNotGgufIsDataLoss) {
  const std::string dir = testing::MakeTempDir();
  Options o = TinyOptions(Arch::kQwen3, dir + "/model.gguf");
  o.vocab_path = o.template_path;
  EXPECT_EQ(WriteModel(o).code(), StatusCode::kDataLoss);
  EXPECT_FALSE(std::filesystem::exists(o.out_path));
}

TEST(MkmodelTest, MissingTemplateIsNotFound) {
  const std::string dir = testing::MakeTempDir();
  Options o = TinyOptions(Arch::kQwen35, dir + "/model.gguf");
  o.template_path = dir + "/no-such-template.jinja";
  EXPECT_EQ(WriteModel(o).code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(o.out_path));
}

TEST(MkmodelTest, UnwritableOutDirIsAnErrorAndLeavesNothing) {
  const std::string dir = testing::MakeTempDir();
  // A regular file as the parent directory: unwritable even for root.
  { std::ofstream(dir + "/file") << "x"; }
  Options o = TinyOptions(Arch::kQwen35, dir + "/file/model.gguf");
  const Status s = WriteModel(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.gguf"), std::string::npos) << s.message();
  o.out_path = dir + "/no-such-dir/model.gguf";
  EXPECT_FALSE(WriteModel(o).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/no-such-dir"));
}

TEST(MkmodelCliTest, PrintsOneLineAndFailsWithAMessage) {
  const std::string dir = testing::MakeTempDir();
  const std::string out = dir + "/m.gguf";
  CommandResult ok = RunCommand(testing::HearthBin() +
                                " mkmodel --arch qwen3 --preset tiny --seed 3 --out " + out);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find(out + ": arch qwen3, preset tiny, "), std::string::npos) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(out));

  CommandResult bad = RunCommand(testing::HearthBin() + " mkmodel --vocab " + dir +
                                 "/missing.gguf --out " + dir + "/x.gguf");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("missing.gguf"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace hearth::mkmodel
