// Authentication and per-key cache isolation through HTTP, on the tiny hybrid model.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/test_server.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

class HttpServerKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig ec;
    ec.context.n_ctx = 4096;
    ec.context.n_threads = 1;
    ec.context.n_seq_max = 4;
    ec.n_parallel = 2;
    HttpConfig hc;
    hc.api_keys = {"key-alpha", "key-beta"};
    hc.warm_ahead = false;  // only what requests themselves leave behind
    server_ = std::make_unique<TestServer>(ec, hc);
    ASSERT_TRUE(server_->ok());
  }

  // The request's HTTP status and its cached prompt tokens (-1 when it failed).
  std::pair<int, int> Ask(const std::string& key) {
    json body = {{"messages", {{{"role", "system"}, {"content", "Be brief. " + std::string(200, 'k')}},
                               {{"role", "user"}, {"content", "What is a key?"}}}},
                 {"max_tokens", 2},
                 {"temperature", 0}};
    auto res = server_->client().Post("/v1/chat/completions", {{"Authorization", "Bearer " + key}}, body.dump(),
                             "application/json");
    if (!res) return {0, -1};
    if (res->status != 200) return {res->status, -1};
    return {200, json::parse(res->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()};
  }

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

}  // namespace
}  // namespace hearth::server
