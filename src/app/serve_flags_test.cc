// `hearth serve`'s command line as llama-server's users type it.
#include "app/serve_flags.h"

#include <gtest/gtest.h>

namespace hearth::app {
namespace {

// Parses `args` (after "hearth serve") as main() does. nullopt-like: the status of
// FinishServeFlags, or of CLI11 as kInvalidArgument.
Status Parse(std::vector<std::string> args, ServeFlags& f) {
  args.insert(args.begin(), {"hearth", "serve"});
  args = ExpandLlamaServerFlags(args);
  CLI::App app;
  CLI::App* cmd = app.add_subcommand("serve");
  AddServeFlags(*cmd, f);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  return FinishServeFlags(f);
}

TEST(ServeFlagsTest, LlamaServersShortFlagsBecomeLongOnesOnlyForServe) {
  EXPECT_EQ(ExpandLlamaServerFlags({"hearth", "serve", "-ngl", "9", "-fa=on", "-m", "x"}),
            (std::vector<std::string>{"hearth", "serve", "--n-gpu-layers", "9", "--flash-attn=on", "-m", "x"}));
  EXPECT_EQ(ExpandLlamaServerFlags({"hearth", "generate", "-fa"}),
            (std::vector<std::string>{"hearth", "generate", "-fa"}));
}

TEST(ServeFlagsTest, ACommonLlamaServerCommandLine) {
  ServeFlags f;
  ASSERT_TRUE(Parse({"-m", "model.gguf", "-ngl", "99", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-c", "0",
                     "--jinja", "--mlock", "--no-mmap", "-np", "4", "-ub", "256", "-dev", "none", "-sm", "none",
                     "-mg", "1", "-ts", "3,1", "--reasoning-format", "deepseek-legacy",
                     "--chat-template-kwargs", R"({"enable_thinking":false,"x":[1]})"},
                    f)
                  .ok());
  EXPECT_EQ(f.model.n_gpu_layers, 99);
  EXPECT_EQ(f.engine.context.flash_attn, engine::FlashAttn::kOn);
  EXPECT_EQ(f.engine.context.type_k, "q8_0");
  EXPECT_EQ(f.engine.context.type_v, "q8_0");
  EXPECT_EQ(f.ctx_size, 0);
  EXPECT_TRUE(f.model.use_mlock);
  EXPECT_FALSE(f.model.use_mmap);
  EXPECT_EQ(f.engine.n_parallel, 4);
  EXPECT_EQ(f.engine.context.n_ubatch, 256);
  EXPECT_EQ(f.model.devices, std::vector<std::string>{"none"});
  EXPECT_EQ(f.model.split_mode, "none");
  EXPECT_EQ(f.model.main_gpu, 1);
  EXPECT_EQ(f.model.tensor_split, (std::vector<float>{3, 1}));
  EXPECT_EQ(f.http.chat_defaults.reasoning_format, "deepseek-legacy");
  EXPECT_EQ(f.http.chat_defaults.template_kwargs.at("enable_thinking"), "false");
  EXPECT_EQ(f.http.chat_defaults.template_kwargs.at("x"), "[1]");
}

TEST(ServeFlagsTest, DefaultsAreLlamaServers) {
  ServeFlags f;
  ASSERT_TRUE(Parse({"-m", "model.gguf"}, f).ok());
  EXPECT_EQ(f.model.n_gpu_layers, -1);
  EXPECT_EQ(f.engine.context.flash_attn, engine::FlashAttn::kAuto);
  EXPECT_EQ(f.engine.context.n_batch, 2048);
  EXPECT_EQ(f.engine.context.n_ubatch, 512);
  EXPECT_EQ(f.engine.context.n_threads, 0);  // llama.cpp's choice (LlamaContextParams)
  EXPECT_EQ(f.engine.context.type_k, "f16");
  EXPECT_TRUE(f.model.use_mmap);
  EXPECT_FALSE(f.ctx_size.has_value());
  EXPECT_EQ(f.http.chat_defaults.reasoning_format, "auto");
  EXPECT_FALSE(f.http.chat_defaults.max_tokens.has_value());  // -n -1: unlimited
}

TEST(ServeFlagsTest, NPredictIsTheDefaultMaxTokens) {
  for (const char* spelling : {"-n", "--n-predict", "--predict"}) {
    ServeFlags f;
    ASSERT_TRUE(Parse({"-m", "model.gguf", spelling, "64"}, f).ok()) << spelling;
    EXPECT_EQ(f.http.chat_defaults.max_tokens, 64) << spelling;
  }
  ServeFlags f;
  ASSERT_TRUE(Parse({"-m", "model.gguf", "-n", "-1"}, f).ok());
  EXPECT_FALSE(f.http.chat_defaults.max_tokens.has_value());
}

TEST(ServeFlagsTest, ShadowPrefillChoosesWhereShadowsAreFed) {
  {
    ServeFlags f;
    ASSERT_TRUE(Parse({"-m", "model.gguf"}, f).ok());
    EXPECT_EQ(f.engine.shadow_feed, server::DefaultShadowFeed());  // auto: the engine's default for its backend
  }
  for (const auto& [value, feed] : {std::pair{"with-decode", server::ShadowFeed::kWithDecode},
                                    std::pair{"after-reply", server::ShadowFeed::kAfterReply},
                                    std::pair{"reply-end", server::ShadowFeed::kReplyEnd},
                                    std::pair{"paced", server::ShadowFeed::kPaced}}) {
    ServeFlags f;
    ASSERT_TRUE(Parse({"-m", "model.gguf", "--shadow-prefill", value}, f).ok()) << value;
    EXPECT_EQ(f.engine.shadow_feed, feed) << value;
  }
  ServeFlags off;
  ASSERT_TRUE(Parse({"-m", "model.gguf", "--shadow-prefill", "off"}, off).ok());
  EXPECT_EQ(off.engine.shadow_feed, server::ShadowFeed::kOff);
  EXPECT_TRUE(off.http.warm_ahead);  // warm-ahead after the reply stays
}

TEST(ServeFlagsTest, UnsupportedLlamaServerFlagsAreRefusedByName) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--lora", "a.gguf"},
                                                                 {"-md", "draft.gguf"},
                                                                 {"--embeddings"},
                                                                 {"--no-jinja"},
                                                                 {"-hf", "org/repo"}}) {
    ServeFlags f;
    std::vector<std::string> full = {"-m", "model.gguf"};
    full.insert(full.end(), args.begin(), args.end());
    const Status s = Parse(full, f);
    ASSERT_FALSE(s.ok()) << args[0];
    EXPECT_NE(s.message().find("hearth does not support"), std::string::npos) << s.message();
  }
  ServeFlags f;
  EXPECT_NE(Parse({"-m", "model.gguf", "--lora", "a.gguf"}, f).message().find("--lora"), std::string::npos);
}

TEST(ServeFlagsTest, BadValuesNameTheirFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-ngl", "lots"}, "--n-gpu-layers"},
      {{"-fa", "maybe"}, "--flash-attn"},
      {{"-ts", "3,x"}, "--tensor-split"},
      {{"--reasoning-format", "loud"}, "--reasoning-format"},
      {{"--chat-template-kwargs", "[1]"}, "--chat-template-kwargs"},
      {{"-sm", "diagonal"}, "--split-mode"},
      {{"-c", "-5"}, "--ctx-size"},
      {{"-n", "0"}, "--n-predict"},
      {{"-n", "-2"}, "--n-predict"},
      {{"--shadow-prefill", "sometimes"}, "--shadow-prefill"},
  };
  for (const auto& [args, flag] : cases) {
    ServeFlags f;
    std::vector<std::string> full = {"-m", "model.gguf"};
    full.insert(full.end(), args.begin(), args.end());
    const Status s = Parse(full, f);
    ASSERT_FALSE(s.ok()) << flag;
    EXPECT_NE(s.message().find(flag), std::string::npos) << s.message();
  }
  ServeFlags f;
  EXPECT_NE(Parse({}, f).message().find("--model is required"), std::string::npos);
}

}  // namespace
}  // namespace hearth::app
