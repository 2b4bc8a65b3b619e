#include "mkmodel/vocab_edit.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "gguf.h"
#include "mkmodel/mkmodel.h"
#include "testing/test_env.h"

namespace hearth::mkmodel {
namespace {

struct GgufFree {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};

// A vocab of two ordinary tokens and three control tokens.
std::unique_ptr<gguf_context, GgufFree> SmallVocab() {
  std::unique_ptr<gguf_context, GgufFree> g(gguf_init_empty());
  const char* tokens[] = {"a", "<|begin|>", "b", "<|eot_id|>", "<|end|>"};
  const int32_t types[] = {1, 3, 1, 3, 3};
  gguf_set_arr_str(g.get(), "tokenizer.ggml.tokens", tokens, 5);
  gguf_set_arr_data(g.get(), "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 5);
  return g;
}

std::string TokenAt(const gguf_context* g, size_t i) {
  return gguf_get_arr_str(g, gguf_find_key(g, "tokenizer.ggml.tokens"), i);
}
int32_t TypeAt(const gguf_context* g, size_t i) {
  return static_cast<const int32_t*>(gguf_get_arr_data(g, gguf_find_key(g, "tokenizer.ggml.token_type")))[i];
}

TEST(VocabEditTest, FamilyTokensTakeTheControlIdsAndTheRestAreUnused) {
  auto g = SmallVocab();
  VocabEdit e;
  e.pre = "dbrx";
  e.tokens = {{"<|eos|>"}, {"<call>", false}};
  e.bos = "<|eos|>";
  e.eos = "<|eos|>";
  ASSERT_TRUE(ApplyVocabEdit(e, g.get()).ok());
  EXPECT_EQ(TokenAt(g.get(), 0), "a");
  EXPECT_EQ(TokenAt(g.get(), 1), "<|eos|>");
  EXPECT_EQ(TypeAt(g.get(), 1), 3);
  EXPECT_EQ(TokenAt(g.get(), 2), "b");
  EXPECT_EQ(TokenAt(g.get(), 3), "<call>");
  EXPECT_EQ(TypeAt(g.get(), 3), 4) << "user-defined: reads as text";
  EXPECT_EQ(TokenAt(g.get(), 4), "<|unused_0|>");
  EXPECT_EQ(TypeAt(g.get(), 4), 3);
  EXPECT_EQ(gguf_get_val_u32(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.bos_token_id")), 1u);
  EXPECT_EQ(gguf_get_val_u32(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.eos_token_id")), 1u);
  EXPECT_FALSE(gguf_get_val_bool(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.add_bos_token")));
  EXPECT_EQ(std::string(gguf_get_val_str(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.pre"))), "dbrx");
}

TEST(VocabEditTest, TooFewControlTokensIsAnErrorAndChangesNothing) {
  auto g = SmallVocab();
  VocabEdit e;
  e.tokens = {{"<1>"}, {"<2>"}, {"<3>"}, {"<4>"}};
  e.bos = "<1>";
  e.eos = "<1>";
  EXPECT_EQ(ApplyVocabEdit(e, g.get()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenAt(g.get(), 1), "<|begin|>");
  EXPECT_LT(gguf_find_key(g.get(), "tokenizer.ggml.eos_token_id"), 0);
}

// The Granite 4.0 template's markers are single control tokens of the file mkmodel
// writes, <|end_of_text|> ends generation, no BOS is added, and llama 3's own markers
// are gone.
TEST(VocabEditTest, GraniteModelTokenizesItsTemplatesMarkers) {
  const std::string dir = testing::MakeTempDir();
  Options o;
  o.arch = Arch::kGraniteHybrid;
  o.vocab_path = testing::LlamaModelsDir() + "/" + std::string(DefaultFiles(o.arch).vocab);
  o.template_path = testing::LlamaModelsDir() + "/" + std::string(DefaultFiles(o.arch).chat_template);
  o.out_path = dir + "/granite.gguf";
  ASSERT_TRUE(WriteModel(o).ok());
  auto model = engine::Model::Load(o.out_path, {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const engine::Model& m = **model;

  for (const char* marker : {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"}) {
    const std::vector<engine::Token> t = m.Tokenize(marker, /*add_bos=*/true, /*parse_special=*/true);
    ASSERT_EQ(t.size(), 1u) << marker;
    EXPECT_TRUE(m.IsControl(t[0])) << marker;
    EXPECT_EQ(m.TokenPiece(t[0], /*render_special=*/true), marker);
  }
  const std::vector<engine::Token> eot = m.Tokenize("<|end_of_text|>", false, true);
  EXPECT_TRUE(m.IsEndOfGeneration(eot[0]));
  const std::vector<engine::Token> call = m.Tokenize("<tool_call>", false, true);
  ASSERT_EQ(call.size(), 1u);
  EXPECT_EQ(m.TokenPiece(call[0], /*render_special=*/false), "<tool_call>");
  EXPECT_GT(m.Tokenize("<|eot_id|>", false, true).size(), 1u);
  EXPECT_EQ(m.Tokenize("hello", /*add_bos=*/true, false).size(), 1u) << "no BOS";
}

// Harmony's markers are single tokens of the gpt-oss file mkmodel writes. A turn ends
// where harmony ends one: <|return|> after the final answer, <|call|> after a tool call;
// <|end|> closes a message (the analysis before the answer) and must not stop
// generation. The marker the chat parser reads stay in the output.
TEST(VocabEditTest, GptOssModelTokenizesHarmonysMarkersAndEndsTurnsWhereHarmonyDoes) {
  const std::string dir = testing::MakeTempDir();
  Options o;
  o.arch = Arch::kGptOss;
  o.vocab_path = testing::LlamaModelsDir() + "/" + std::string(DefaultFiles(o.arch).vocab);
  o.template_path = testing::LlamaModelsDir() + "/" + std::string(DefaultFiles(o.arch).chat_template);
  o.out_path = dir + "/gpt-oss.gguf";
  ASSERT_TRUE(WriteModel(o).ok());
  auto model = engine::Model::Load(o.out_path, {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const engine::Model& m = **model;

  auto single = [&](const char* marker) {
    const std::vector<engine::Token> t = m.Tokenize(marker, /*add_bos=*/false, /*parse_special=*/true);
    EXPECT_EQ(t.size(), 1u) << marker;
    return t.empty() ? engine::Token{-1} : t[0];
  };
  for (const char* marker : {"<|return|>", "<|call|>", "<|endoftext|>"}) {
    EXPECT_TRUE(m.IsEndOfGeneration(single(marker))) << marker;
  }
  for (const char* marker : {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"}) {
    const engine::Token t = single(marker);
    EXPECT_FALSE(m.IsEndOfGeneration(t)) << marker;
    EXPECT_EQ(m.TokenPiece(t, /*render_special=*/false), marker) << "read by the chat parser";
  }
  EXPECT_GT(m.Tokenize("<|eot_id|>", false, true).size(), 1u);
  EXPECT_EQ(m.Tokenize("hello", /*add_bos=*/true, false).size(), 1u) << "no BOS";
}

}  // namespace
}  // namespace hearth::mkmodel
