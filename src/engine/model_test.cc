#include "engine/model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>
#include <fstream>

#include "testing/test_env.h"

namespace hearth::engine {
namespace {

TEST(ModelTest, HybridReportsItsLayerKinds) {
  const Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  const ModelInfo& info = m->info();
  EXPECT_EQ(info.arch, "qwen35");
  EXPECT_TRUE(info.has_recurrent);
  ASSERT_EQ(static_cast<int>(info.layers.size()), info.n_layer);
  int n_attn = 0, n_rec = 0;
  for (LayerKind k : info.layers) (k == LayerKind::kRecurrent ? n_rec : n_attn)++;
  EXPECT_GT(n_rec, 0);
  EXPECT_GT(n_attn, 0);
  EXPECT_EQ(info.layers.back(), LayerKind::kAttention) << "qwen35 puts full attention on every 4th layer";
  // The real Qwen3.5 template (with its <think> handling), not the vocab file's ChatML.
  EXPECT_NE(info.chat_template.find("<think>"), std::string::npos);
  EXPECT_EQ(info.fingerprint.size(), 32u);
}

TEST(ModelTest, AttentionOnlyModelHasNoRecurrentLayers) {
  const Model* m = testing::LoadTestModel("qwen3");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->info().has_recurrent);
  for (LayerKind k : m->info().layers) EXPECT_EQ(k, LayerKind::kAttention);
}

// Gemma 4 marks its layers with a flag each (sliding_window_pattern as a bool array),
// not with one period: read as a number it said "every layer slides".
TEST(ModelTest, SlidingWindowModelReportsWhichLayersSlide) {
  const Model* m = testing::LoadTestModel("gemma4");
  ASSERT_NE(m, nullptr);
  const ModelInfo& info = m->info();
  EXPECT_EQ(info.n_swa, 32);
  EXPECT_FALSE(info.has_recurrent);
  EXPECT_EQ(info.layers, (std::vector<LayerKind>{LayerKind::kSlidingWindow, LayerKind::kSlidingWindow,
                                                 LayerKind::kSlidingWindow, LayerKind::kAttention}));
}

// gpt-oss files carry no pattern: llama.cpp's loader alternates sliding and full layers
// by default, and read as "no pattern, every layer slides" the model had no full layer.
TEST(ModelTest, GptOssAlternatesSlidingAndFullLayersWithoutAPatternKey) {
  const Model* m = testing::LoadTestModel("gpt-oss");
  ASSERT_NE(m, nullptr);
  const ModelInfo& info = m->info();
  EXPECT_EQ(info.n_swa, 32);
  EXPECT_FALSE(info.has_recurrent);
  EXPECT_EQ(info.layers, (std::vector<LayerKind>{LayerKind::kSlidingWindow, LayerKind::kAttention,
                                                 LayerKind::kSlidingWindow, LayerKind::kAttention}));
}

// What the cache keeps for a model follows from its layers (engine_loop.cc's CacheConfig).
TEST(ModelInfoTest, LayersDecidePartialAndSuffixStates) {
  const auto info = [](std::vector<LayerKind> layers, int n_swa) {
    ModelInfo i;
    i.layers = std::move(layers);
    i.n_layer = static_cast<int>(i.layers.size());
    i.n_swa = n_swa;
    for (LayerKind k : i.layers) i.has_recurrent |= k == LayerKind::kRecurrent;
    return i;
  };
  const LayerKind a = LayerKind::kAttention, r = LayerKind::kRecurrent, w = LayerKind::kSlidingWindow;
  const ModelInfo attention = info({a, a}, 0), hybrid = info({r, r, r, a}, 0), recurrent = info({r, r}, 0),
                  sliding = info({w, a}, 32), sliding_hybrid = info({r, w, a}, 32);
  EXPECT_FALSE(attention.NeedsPartialStates());
  EXPECT_FALSE(attention.HasSuffixStates());
  EXPECT_TRUE(hybrid.NeedsPartialStates());
  EXPECT_TRUE(hybrid.HasSuffixStates());
  // A state of recurrent layers alone has no attention prefix to leave out.
  EXPECT_TRUE(recurrent.NeedsPartialStates());
  EXPECT_FALSE(recurrent.HasSuffixStates());
  // Context::SaveSuffix refuses a sliding window.
  EXPECT_TRUE(sliding.NeedsPartialStates());
  EXPECT_FALSE(sliding.HasSuffixStates());
  EXPECT_TRUE(sliding_hybrid.NeedsPartialStates());
  EXPECT_FALSE(sliding_hybrid.HasSuffixStates());
}

TEST(ModelTest, FingerprintIsStableAndContentBased) {
  auto a = FingerprintFile(testing::TestModelPath("qwen35"));
  auto b = FingerprintFile(testing::TestModelPath("qwen35"));
  auto c = FingerprintFile(testing::TestModelPath("qwen3"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(FingerprintFile("/nonexistent/x.gguf").status().code(), StatusCode::kNotFound);
}

// Big files are sampled: a change in the head, in the weights or at the end shows.
TEST(ModelTest, FingerprintOfABigFileSeesChangesThroughout) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/big.bin";
  std::vector<char> bytes(40u << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  auto write = [&] { std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size())); };
  write();
  auto base = FingerprintFile(path);
  ASSERT_TRUE(base.ok());
  // In the head, in the 129th sample (8 MiB + 128 * (32 MiB / 256)), in the tail.
  for (size_t at : {size_t{100}, (size_t{8} << 20) + 128 * (size_t{128} << 10) + 100, bytes.size() - 1}) {
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5A);
    write();
    auto changed = FingerprintFile(path);
    ASSERT_TRUE(changed.ok());
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5A);
    EXPECT_NE(*changed, *base) << "byte " << at;
  }
  write();
  EXPECT_EQ(*FingerprintFile(path), *base);
}

TEST(ModelTest, TokenizeRoundTripsMultibyteText) {
  const Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  const std::string text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82 done";
  std::vector<Token> toks = m->Tokenize(text, false, false);
  ASSERT_FALSE(toks.empty());
  EXPECT_EQ(m->Detokenize(toks, false), text);
}

TEST(ModelTest, SpecialTokensParseOnlyWhenAsked) {
  const Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->Tokenize("<|im_start|>", false, true).size(), 1u);
  EXPECT_GT(m->Tokenize("<|im_start|>", false, false).size(), 1u);
  const Token im_end = m->Tokenize("<|im_end|>", false, true).at(0);
  EXPECT_TRUE(m->IsEndOfGeneration(im_end));
  EXPECT_EQ(m->TokenPiece(im_end, true), "<|im_end|>");
  EXPECT_FALSE(m->IsValidToken(m->info().n_vocab));
  EXPECT_EQ(m->TokenPiece(-5, true), "");
}

TEST(ModelTest, MissingFileIsNotFound) {
  auto m = Model::Load("/nonexistent/model.gguf", {});
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

TEST(ModelTest, NonGgufFileIsRejected) {
  std::string path = testing::MakeTempDir() + "/not-a-model.gguf";
  std::ofstream(path) << "this is not a GGUF file, just text\n";
  auto m = Model::Load(path, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("GGUF"), std::string::npos);
}

TEST(ModelTest, TruncatedFileIsRejected) {
  const std::string src = testing::TestModelPath("qwen35");
  const auto size = std::filesystem::file_size(src);
  for (double frac : {0.001, 0.5, 0.99}) {
    std::string path = testing::MakeTempDir() + "/truncated.gguf";
    std::filesystem::copy_file(src, path);
    std::filesystem::resize_file(path, static_cast<uintmax_t>(static_cast<double>(size) * frac));
    auto m = Model::Load(path, {});
    ASSERT_FALSE(m.ok()) << "loaded a file cut to " << frac;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace hearth::engine
