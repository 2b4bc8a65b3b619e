// Authentication and per-key cache isolation through HTTP, on the tiny hybrid model.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/test_server.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

// The request's HTTP status and its cached prompt tokens (-1 when it failed).
std::pair<int, int> Ask(TestServer& server, const std::string& key, const std::string& system = "Be brief.") {
  json body = {{"messages", {{{"role", "system"}, {"content", system + " " + std::string(200, 'k')}},
                             {{"role", "user"}, {"content", "What is a key?"}}}},
               {"max_tokens", 2},
               {"temperature", 0}};
  auto res = server.client().Post("/v1/chat/completions", {{"Authorization", "Bearer " + key}}, body.dump(),
                                  "application/json");
  if (!res) return {0, -1};
  if (res->status != 200) return {res->status, -1};
  return {200, json::parse(res->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()};
}

EngineConfig SmallEngine() {
  EngineConfig ec;
  ec.context.n_ctx = 4096;
  ec.context.n_threads = 1;
  ec.context.n_seq_max = 4;
  ec.n_parallel = 2;
  return ec;
}

class HttpServerKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpConfig hc;
    hc.api_keys = MakeApiKeys({"key-alpha", "key-beta"}, "test-secret");
    hc.warm_ahead = false;  // only what requests themselves leave behind
    server_ = std::make_unique<TestServer>(SmallEngine(), hc);
    ASSERT_TRUE(server_->ok());
  }

  std::pair<int, int> Ask(const std::string& key) { return server::Ask(*server_, key); }

  std::unique_ptr<TestServer> server_;
};

TEST_F(HttpServerKeysTest, EachKeyHasItsOwnCacheNamespace) {
  EXPECT_EQ(Ask("key-alpha"), std::make_pair(200, 0));
  const auto again = Ask("key-alpha");
  EXPECT_EQ(again.first, 200);
  EXPECT_GT(again.second, 0) << "the same client resumes from its own states";
  EXPECT_EQ(Ask("key-beta"), std::make_pair(200, 0)) << "another key never resumes from them";
  EXPECT_GT(Ask("key-beta").second, 0);
  EXPECT_EQ(Ask("key-gamma").first, 401);
  EXPECT_EQ(Ask("key-alph").first, 401);
}

// A key's namespace follows the key, not its place among the keys: after a restart over
// the same cache directory with the keys given in another order, each key finds its own
// disk states and never another's.
TEST(HttpServerKeysRestartTest, NamespacesFollowTheKeyAcrossARestart) {
  const std::string dir = testing::MakeTempDir() + "/cache";
  EngineConfig ec = SmallEngine();
  ec.context.n_seq_max = 1;  // one sequence: the next conversation moves the last to disk
  ec.n_parallel = 1;
  ec.cache_ram_bytes = 1;
  ec.cache_dir = dir;
  HttpConfig hc;
  hc.warm_ahead = false;
  {
    auto secret = LoadNamespaceSecret(dir);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    hc.api_keys = MakeApiKeys({"key-alpha", "key-beta"}, *secret);
    TestServer server(ec, hc);
    ASSERT_TRUE(server.ok());
    EXPECT_EQ(Ask(server, "key-alpha"), std::make_pair(200, 0));
    EXPECT_EQ(Ask(server, "key-alpha", "Be thorough.").first, 200);  // alpha's first conversation goes to disk
  }
  auto secret = LoadNamespaceSecret(dir);
  ASSERT_TRUE(secret.ok());
  hc.api_keys = MakeApiKeys({"key-beta", "key-alpha"}, *secret);
  TestServer server(ec, hc);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(Ask(server, "key-beta"), std::make_pair(200, 0)) << "beta never resumes from alpha's states";
  const auto alpha = Ask(server, "key-alpha");
  EXPECT_EQ(alpha.first, 200);
  EXPECT_GT(alpha.second, 0) << "alpha resumes its own, from disk";
}

}  // namespace
}  // namespace hearth::server
