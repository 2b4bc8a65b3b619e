// `hearth serve` as a user starts it: the real binary, no flags but the model.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "testing/serve_process.h"
#include "testing/test_env.h"

namespace hearth {
namespace {

using json = nlohmann::json;

using testing::ReadFile;
using testing::ServeProcess;

// Claude Code's first request (its system prompt and tool schemas: 11.7k tokens in the
// fixture, 19k from recent versions)
// against a server started with nothing but the model: the context is sized from the
// model and memory, not a fixed 8192 cells.
TEST(ServeTest, DefaultsServeClaudeCodesFirstRequest) {
  const std::string dir = testing::MakeTempDir();
  const std::string log = dir + "/serve.log";
  ServeProcess serve({testing::HearthBin(), "serve", "-m", testing::TestModelPath("qwen35"), "--port", "0"}, log);
  const std::optional<int> port = serve.WaitForPort(std::chrono::seconds(120));
  ASSERT_TRUE(port.has_value()) << ReadFile(log);

  json body = json::parse(ReadFile(testing::SourceDir() + "/tests/e2e/fixtures/claude-code-request.json"));
  body["stream"] = false;
  body["max_tokens"] = 32000;  // what Claude Code sends: a cap, clamped to the room left
  // Random weights never stop on their own: end the reply within a few tokens, as
  // tests/e2e/claude-code.test.js does.
  body["stop_sequences"] = {" ", "\n", "e", "a", "o", "i", "n", "t", "s", "."};
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(300, 0);
  auto res = client.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200) << res->body << "\n" << ReadFile(log);
  const json reply = json::parse(res->body);
  const json& usage = reply["usage"];
  // More than the 8192 cells `hearth serve` used to default to.
  EXPECT_GT(usage["input_tokens"].get<int>() + usage["cache_creation_input_tokens"].get<int>() +
                usage["cache_read_input_tokens"].get<int>(),
            8192)
      << res->body;

  const std::string startup = ReadFile(log);
  EXPECT_NE(startup.find("hearth: context 262144 cells: the model's training context"), std::string::npos)
      << startup;
  EXPECT_NE(startup.find("hearth: memory: KV 512 B/cell"), std::string::npos) << startup;
}

// llama-server's flags reach llama.cpp: its own log says what it was given.
TEST(ServeTest, LlamaServerFlagsReachLlamaCpp) {
  const std::string dir = testing::MakeTempDir();
  const std::string log = dir + "/serve.log";
  ServeProcess serve({testing::HearthBin(), "serve", "-v", "-m", testing::TestModelPath("qwen35"), "--port", "0",
                      "-ngl", "0", "-fa", "off", "-ctk", "q8_0", "-c", "0", "--jinja", "--no-mmap", "-np", "1", "-ub",
                      "128", "-t", "1", "--cache-dir", dir + "/cache"},
                     log);
  const std::optional<int> port = serve.WaitForPort(std::chrono::seconds(120));
  ASSERT_TRUE(port.has_value()) << ReadFile(log);
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(120, 0);
  auto res = client.Post("/v1/completions", R"({"prompt":"hello there","max_tokens":2})", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;

  const std::string text = ReadFile(log);
  for (const char* want : {"load_mode = none",                       // --no-mmap
                           "n_seq_max             = 3",              // -np 1 and 2 cached sequences
                           "n_ctx                 = 262144",         // -c 0: the training context
                           "n_batch               = 2048",           // -b unset: llama-server's default
                           "n_ubatch              = 128",            // -ub
                           "flash_attn            = disabled",       // -fa off
                           "K (q8_0)",                               // -ctk
                           "flash attention off (-fa off), KV cache K q8_0 V f16"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  std::error_code ec;
  bool states_dir = false;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/cache", ec)) {
    states_dir |= e.path().filename().string().rfind("states-", 0) == 0;
  }
  EXPECT_TRUE(states_dir) << "the disk tier lives in its model's and layout's own directory";
}

// llama-server flags hearth does not support stop it with their name, not silently.
TEST(ServeTest, AnUnsupportedLlamaServerFlagIsRefusedByName) {
  const std::string dir = testing::MakeTempDir();
  const std::string log = dir + "/serve.log";
  ServeProcess serve({testing::HearthBin(), "serve", "-m", testing::TestModelPath("qwen35"), "--port", "0",
                      "--lora", "adapter.gguf"},
                     log);
  EXPECT_FALSE(serve.WaitForPort(std::chrono::seconds(60)).has_value());
  EXPECT_NE(ReadFile(log).find("--lora is a llama-server flag hearth does not support"), std::string::npos)
      << ReadFile(log);
}

}  // namespace
}  // namespace hearth
