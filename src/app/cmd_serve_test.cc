// `hearth serve` as a user starts it: the real binary, no flags but the model.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
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
  EXPECT_GT(usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>(), 8192) << res->body;

  const std::string startup = ReadFile(log);
  EXPECT_NE(startup.find("hearth: context 262144 cells: the model's training context"), std::string::npos)
      << startup;
  EXPECT_NE(startup.find("hearth: memory: KV 512 B/cell"), std::string::npos) << startup;
}

}  // namespace
}  // namespace hearth
