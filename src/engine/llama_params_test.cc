// The options llama-server's flags set, as they reach llama.cpp: in the parameter structs
// it is given, and in the context it builds.
#include "engine/llama_params.h"

#include <gtest/gtest.h>

#include "common.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

TEST(LlamaModelParamsTest, CarriesLayersLoadModeAndSplit) {
  ModelOptions o;
  o.n_gpu_layers = 7;
  o.use_mmap = false;
  o.split_mode = "row";
  o.main_gpu = 1;
  o.tensor_split = {3, 1};
  auto setup = LlamaModelParams(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  const llama_model_params& p = (*setup)->params;
  EXPECT_EQ(p.n_gpu_layers, 7);
  EXPECT_EQ(p.load_mode, LLAMA_LOAD_MODE_NONE);
  EXPECT_EQ(p.split_mode, LLAMA_SPLIT_MODE_ROW);
  EXPECT_EQ(p.main_gpu, 1);
  ASSERT_NE(p.tensor_split, nullptr);
  EXPECT_EQ(p.tensor_split[0], 3.0f);
  EXPECT_EQ(p.tensor_split[1], 1.0f);
  EXPECT_EQ(p.devices, nullptr);  // every device found
}

TEST(LlamaModelParamsTest, MlockWithAndWithoutMmap) {
  ModelOptions o;
  o.use_mlock = true;
  auto mapped = LlamaModelParams(o);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ((*mapped)->params.load_mode, LLAMA_LOAD_MODE_MMAP_MLOCK);
  o.use_mmap = false;
  auto read = LlamaModelParams(o);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)->params.load_mode, LLAMA_LOAD_MODE_MLOCK);
}

TEST(LlamaModelParamsTest, DeviceNoneMeansNoOffloadAndUnknownDevicesAreNamed) {
  ModelOptions o;
  o.devices = {"none"};
  auto none = LlamaModelParams(o);
  ASSERT_TRUE(none.ok());
  ASSERT_NE((*none)->params.devices, nullptr);
  EXPECT_EQ((*none)->params.devices[0], nullptr);  // an empty list: no device

  o.devices = {"NoSuchGPU7"};
  auto unknown = LlamaModelParams(o);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("NoSuchGPU7"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("found:"), std::string::npos);
}

TEST(LlamaModelParamsTest, BadOptionsAreRefusedByFlag) {
  ModelOptions o;
  o.split_mode = "diagonal";
  EXPECT_NE(LlamaModelParams(o).status().message().find("--split-mode"), std::string::npos);
  o = {};
  o.tensor_split = {1, -1};
  EXPECT_NE(LlamaModelParams(o).status().message().find("--tensor-split"), std::string::npos);
}

TEST(LlamaModelParamsTest, RpcServersNeedTheRpcBackend) {
  ModelOptions o;
  o.rpc_servers = {"127.0.0.1:1"};
  auto setup = LlamaModelParams(o);
  ASSERT_FALSE(setup.ok());
  // This build's llama.cpp decides which refusal: none without the backend, a server that
  // cannot be reached with it.
  const bool has_rpc = ggml_backend_reg_by_name("RPC") != nullptr;
  EXPECT_EQ(setup.status().code(), has_rpc ? StatusCode::kInvalidArgument : StatusCode::kUnimplemented)
      << setup.status().ToString();
}

TEST(ContextParamsTest, FlashAttentionAndKvTypesReachTheParams) {
  ContextOptions o;
  o.flash_attn = FlashAttn::kOff;
  o.type_k = "q8_0";
  o.type_v = "bf16";
  const llama_context_params p = LlamaContextParams(o);
  EXPECT_EQ(p.flash_attn_type, LLAMA_FLASH_ATTN_TYPE_DISABLED);
  EXPECT_EQ(p.type_k, GGML_TYPE_Q8_0);
  EXPECT_EQ(p.type_v, GGML_TYPE_BF16);
  o.flash_attn = FlashAttn::kAuto;
  EXPECT_EQ(LlamaContextParams(o).flash_attn_type, LLAMA_FLASH_ATTN_TYPE_AUTO);
}

// Unset threads are llama-server's: the cores useful for math, which on SMT and hybrid
// CPUs are fewer than the hardware threads (on a host without either, the same number).
TEST(ContextParamsTest, ThreadsAreLlamaServersUnlessGiven) {
  ContextOptions o;
  llama_context_params p = LlamaContextParams(o);
  EXPECT_EQ(p.n_threads, common_cpu_get_num_math());
  EXPECT_EQ(p.n_threads_batch, common_cpu_get_num_math());
  o.n_threads = 3;
  p = LlamaContextParams(o);
  EXPECT_EQ(p.n_threads, 3);
  EXPECT_EQ(p.n_threads_batch, 3);
}

TEST(ContextParamsTest, ValidateRefusesUnknownTypesAndQuantizedVWithoutFlashAttention) {
  ContextOptions o;
  o.type_k = "q3_k";
  EXPECT_NE(o.Validate().message().find("--cache-type-k"), std::string::npos);
  o = {};
  o.type_v = "q4_0";
  EXPECT_TRUE(o.Validate().ok());  // auto turns flash attention on for it
  o.flash_attn = FlashAttn::kOff;
  EXPECT_NE(o.Validate().message().find("needs flash attention"), std::string::npos);
}

TEST(ContextParamsTest, ParseFlashAttnTakesLlamaServersSpellings) {
  EXPECT_EQ(*ParseFlashAttn("on"), FlashAttn::kOn);
  EXPECT_EQ(*ParseFlashAttn("off"), FlashAttn::kOff);
  EXPECT_EQ(*ParseFlashAttn("auto"), FlashAttn::kAuto);
  EXPECT_EQ(*ParseFlashAttn("1"), FlashAttn::kOn);
  EXPECT_FALSE(ParseFlashAttn("maybe").ok());
}

// What llama.cpp built: flash attention resolved, and a q8_0 K cache holding the same
// tokens in fewer bytes.
TEST(ContextParamsTest, TheContextRunsWhatTheOptionsAsk) {
  const Model* model = testing::LoadTestModel("qwen3");
  ASSERT_NE(model, nullptr);
  auto make = [&](FlashAttn fa, const char* type_k) {
    ContextOptions o;
    o.n_ctx = 256;
    o.n_seq_max = 1;
    o.n_threads = 1;
    o.flash_attn = fa;
    o.type_k = type_k;
    return Context::Create(*model, o);
  };
  auto off = make(FlashAttn::kOff, "f16");
  auto on = make(FlashAttn::kOn, "f16");
  auto automatic = make(FlashAttn::kAuto, "f16");
  auto quantized = make(FlashAttn::kOn, "q8_0");
  ASSERT_TRUE(off.ok() && on.ok() && automatic.ok() && quantized.ok());
  EXPECT_FALSE((*off)->flash_attn());
  EXPECT_TRUE((*on)->flash_attn());
  EXPECT_TRUE((*automatic)->flash_attn());  // the CPU backend supports it
  EXPECT_EQ((*off)->StateLayout(), "kv-f16-f16");
  EXPECT_EQ((*quantized)->StateLayout(), "kv-q8_0-f16-fa");

  const std::vector<Token> tokens = {100, 200, 300, 400, 500, 600, 700, 800};
  ASSERT_TRUE((*on)->Prefill(0, tokens, 0, false).ok());
  ASSERT_TRUE((*quantized)->Prefill(0, tokens, 0, false).ok());
  EXPECT_LT((*quantized)->StateSize(0, StatePart::kAll), (*on)->StateSize(0, StatePart::kAll));
}

}  // namespace
}  // namespace hearth::engine
