// TestServer (tests only): an EngineLoop and an HttpServer on the tiny hybrid model with
// its real Qwen3.5 template, listening on a free port, and a client for it. For the tests
// that go through HTTP.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/engine_loop.h"
#include "server/http_server.h"
#include "testing/test_env.h"

namespace hearth::server {

class TestServer {
 public:
  // `ec.cache_namespace` is set to the model's fingerprint and `hc.port` to 0. On failure
  // the calling test has failed and ok() is false.
  TestServer(EngineConfig ec, HttpConfig hc) {
    model_ = testing::LoadTestModel("qwen35");
    tmpl_ = testing::LoadTestTemplate("qwen35");
    if (model_ == nullptr || tmpl_ == nullptr) return;
    ec.cache_namespace = model_->info().fingerprint;
    hc.port = 0;
    loop_ = std::make_unique<EngineLoop>(*model_, ec);
    http_ = std::make_unique<HttpServer>(hc, *model_, *tmpl_, *loop_);
    if (Status s = loop_->Start(); !s.ok()) {
      ADD_FAILURE() << s.ToString();
      return;
    }
    if (Status s = http_->Bind(); !s.ok()) {
      ADD_FAILURE() << s.ToString();
      return;
    }
    serve_ = std::thread([this] { http_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(120, 0);
  }
  ~TestServer() {
    if (http_) http_->Stop();
    if (serve_.joinable()) serve_.join();
    if (loop_) loop_->Stop();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  bool ok() const { return client_ != nullptr; }
  const engine::Model& model() const { return *model_; }
  const engine::ChatTemplate& chat_template() const { return *tmpl_; }
  EngineLoop& loop() { return *loop_; }
  const HttpServer& http() const { return *http_; }
  httplib::Client& client() { return *client_; }
  int port() const { return http_->port(); }

 private:
  const engine::Model* model_ = nullptr;
  const engine::ChatTemplate* tmpl_ = nullptr;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<HttpServer> http_;
  std::thread serve_;
  std::unique_ptr<httplib::Client> client_;
};

// One slot, three sequences and a 4096-cell context on one thread: the tiny model's
// settings for tests that look at what one conversation leaves in the cache.
inline EngineConfig OneSlotConfig() {
  EngineConfig ec;
  ec.context.n_ctx = 4096;
  ec.context.n_batch = 256;
  ec.context.n_ubatch = 256;
  ec.context.n_threads = 1;
  ec.n_parallel = 1;
  ec.context.n_seq_max = 3;
  return ec;
}

// A greedy, non-thinking chat completion; the parsed response, or {} after failing the
// test when the status is not 200. `salt`: the request's cache_salt when not empty.
inline nlohmann::json PostGreedyChat(httplib::Client& c, const nlohmann::json& messages, int max_tokens,
                                     const std::string& salt = "") {
  nlohmann::json body = {{"messages", messages},
                         {"max_tokens", max_tokens},
                         {"temperature", 0},
                         {"chat_template_kwargs", {{"enable_thinking", false}}}};
  if (!salt.empty()) body["cache_salt"] = salt;
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  return res && res->status == 200 ? nlohmann::json::parse(res->body) : nlohmann::json{};
}

}  // namespace hearth::server
