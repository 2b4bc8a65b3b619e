// GET /v1/cache and the web page at / through HTTP on the tiny hybrid model: with API
// keys each key sees only its own conversations, tree nodes and requests; the page needs
// no key and is served with a policy that keeps it to its own origin.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "server/test_server.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

EngineConfig SmallEngine() {
  EngineConfig ec;
  ec.context.n_ctx = 4096;
  ec.context.n_threads = 1;
  ec.context.n_seq_max = 4;
  ec.n_parallel = 2;
  return ec;
}

class CacheRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpConfig hc;
    hc.api_keys = MakeApiKeys({"key-alpha", "key-beta"}, "test-secret");
    hc.warm_ahead = false;  // only what requests themselves leave behind
    server_ = std::make_unique<TestServer>(SmallEngine(), hc);
    ASSERT_TRUE(server_->ok());
  }

  int Ask(const std::string& key, const std::string& user) {
    json body = {{"messages", {{{"role", "system"}, {"content", "Be brief. " + std::string(200, 'k')}},
                               {{"role", "user"}, {"content", user}}}},
                 {"max_tokens", 2},
                 {"temperature", 0}};
    auto res = server_->client().Post("/v1/chat/completions", {{"Authorization", "Bearer " + key}}, body.dump(),
                                      "application/json");
    return res ? res->status : 0;
  }

  json Cache(const std::string& key) {
    auto res = server_->client().Get("/v1/cache", httplib::Headers{{"Authorization", "Bearer " + key}});
    if (!res || res->status != 200) return json();
    return json::parse(res->body);
  }

  // The summary once the engine has published one with `n` conversations in it.
  json CacheWith(const std::string& key, size_t n) {
    json j;
    for (int i = 0; i < 100; ++i) {
      j = Cache(key);
      if (j.is_object() && j["n_conversations"] == n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return j;
  }

  std::unique_ptr<TestServer> server_;
};

std::set<std::string> NamespacesIn(const json& j) {
  std::set<std::string> out;
  for (const char* list : {"conversations", "namespaces", "requests"}) {
    for (const auto& e : j[list]) out.insert(e["namespace"].get<std::string>());
  }
  for (const auto& n : j["tree"]["nodes"]) out.insert(n["namespace"].get<std::string>());
  return out;
}

TEST_F(CacheRouteTest, EachKeySeesOnlyItsOwnCacheAndRequests) {
  ASSERT_EQ(Ask("key-alpha", "What is a key?"), 200);
  ASSERT_EQ(Ask("key-alpha", "What is a lock?"), 200);
  ASSERT_EQ(Ask("key-beta", "What is a door?"), 200);

  const json alpha = CacheWith("key-alpha", 2);
  ASSERT_TRUE(alpha.is_object());
  EXPECT_EQ(alpha["n_conversations"], 2);
  ASSERT_EQ(alpha["requests"].size(), 2u) << alpha.dump();
  EXPECT_EQ(alpha["requests"][0]["reused_tokens"], 0);
  EXPECT_GT(alpha["requests"][1]["reused_tokens"].get<int>(), 50) << "the second shares the system prompt";
  EXPECT_EQ(alpha["requests"][1]["prefilled_tokens"].get<int>() + alpha["requests"][1]["reused_tokens"].get<int>(),
            alpha["requests"][1]["prompt_tokens"].get<int>());
  EXPECT_TRUE(alpha["requests"][1]["ttft_ms"].is_number());
  const json& nodes = alpha["tree"]["nodes"];
  ASSERT_GE(nodes.size(), 4u) << "a root, the shared prefix, two conversations: " << nodes.dump();
  bool parts = false;
  for (const auto& n : nodes) parts = parts || n["children"].get<int>() >= 2;
  EXPECT_TRUE(parts) << "the two conversations part at a node: " << nodes.dump();

  const json beta = CacheWith("key-beta", 1);
  ASSERT_TRUE(beta.is_object());
  EXPECT_EQ(beta["n_conversations"], 1);
  ASSERT_EQ(beta["requests"].size(), 1u);
  EXPECT_EQ(beta["requests"][0]["reused_tokens"], 0) << "another key never resumes from alpha's states";

  const auto alpha_ns = NamespacesIn(alpha);
  const auto beta_ns = NamespacesIn(beta);
  ASSERT_EQ(alpha_ns.size(), 1u);
  ASSERT_EQ(beta_ns.size(), 1u);
  EXPECT_NE(*alpha_ns.begin(), *beta_ns.begin());

  auto no_key = server_->client().Get("/v1/cache");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
}

TEST_F(CacheRouteTest, ThePageNeedsNoKeyAndStaysOnItsOrigin) {
  auto res = server_->client().Get("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(res->get_header_value("Content-Security-Policy").find("connect-src 'self'"), std::string::npos);
  EXPECT_NE(res->body.find("<title>hearth</title>"), std::string::npos);
  EXPECT_EQ(res->body.find("http://"), std::string::npos) << "nothing from elsewhere";
  EXPECT_EQ(res->body.find("https://"), std::string::npos) << "nothing from elsewhere";
  auto post = server_->client().Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401) << "only GET / is open";
}

}  // namespace
}  // namespace hearth::server
