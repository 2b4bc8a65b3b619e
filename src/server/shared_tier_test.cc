// The shared tier through HTTP on the tiny hybrid model: two servers ("replicas") share
// one store, and a conversation whose turns alternate between them prefills only what is
// new on each follow-up, answering as a cold run answers.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/memory_shared_store.h"
#include "server/test_server.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

EngineConfig Config(std::shared_ptr<cache::SharedStore> shared) {
  EngineConfig ec = OneSlotConfig();
  ec.open_shared_tier = [shared](const std::string&) -> StatusOr<std::shared_ptr<cache::SharedStore>> { return shared; };
  return ec;
}

HttpConfig Http() {
  HttpConfig hc;
  hc.model_alias = "tiny";
  return hc;
}

// Waits until `shared` has stored more states than `before` (the replica writes behind,
// once idle): as a user reading the reply gives it time to.
bool WaitForWrites(const cache::SharedStore& shared, int64_t before) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (shared.stats().written <= before) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the rest of that idle pass
  return true;
}

TEST(SharedTierTest, TurnsAlternatingBetweenReplicasPrefillOnlyWhatIsNew) {
  auto shared = std::make_shared<cache::MemorySharedStore>();
  TestServer a(Config(shared), Http()), b(Config(shared), Http());
  ASSERT_TRUE(a.ok() && b.ok());
  TestServer* replicas[] = {&a, &b};
  json messages = {{{"role", "system"}, {"content", "You answer briefly. " + std::string(400, 's')}},
                   {{"role", "user"}, {"content", "Hello?"}}};
  int prompt_before = 0;
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    TestServer& r = *replicas[turn % 2];
    const int64_t written = shared->stats().written;
    json reply = PostGreedyChat(r.client(), messages, 6);
    const json& usage = reply["usage"];
    const int prompt = usage["prompt_tokens"].get<int>();
    const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
    if (turn > 0) {
      EXPECT_EQ(usage["hearth_cache"]["tier"], "shared") << usage.dump();
      // What is new: the user's message and the turn markers around it.
      EXPECT_GE(cached, prompt_before) << usage.dump();
      EXPECT_LE(prompt - cached, prompt - prompt_before) << usage.dump();
    }
    prompt_before = prompt;
    messages.push_back({{"role", "assistant"}, {"content", reply["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "Go on, part " + std::to_string(turn) + "."}});
    ASSERT_TRUE(WaitForWrites(*shared, written)) << "the replica wrote nothing to the shared tier";
  }
  auto res = b.client().Get("/v1/cache");
  ASSERT_TRUE(res && res->status == 200);
  const json tier = json::parse(res->body)["tiers"]["shared"];
  EXPECT_EQ(tier["hits"], 3) << tier.dump();  // turns 1-3 (both replicas share this one store object)
  EXPECT_EQ(tier["connected"], true) << tier.dump();
}

// A client that sends back another reply than the generated one (an agent's scripted or
// re-serialized tool call): each follow-up, on the other replica, resumes at the last
// turn's generation start.
TEST(SharedTierTest, RepliesTheClientReplacedResumeAtTheirGenerationStartOnTheOtherReplica) {
  auto shared = std::make_shared<cache::MemorySharedStore>();
  TestServer a(Config(shared), Http()), b(Config(shared), Http());
  ASSERT_TRUE(a.ok() && b.ok());
  TestServer* replicas[] = {&a, &b};
  json messages = {{{"role", "system"}, {"content", "You answer briefly. " + std::string(400, 's')}},
                   {{"role", "user"}, {"content", "Hello?"}}};
  int prompt_before = 0;
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    const int64_t written = shared->stats().written;
    json reply = PostGreedyChat(replicas[turn % 2]->client(), messages, 6);
    const json& usage = reply["usage"];
    const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
    if (turn > 0) {
      EXPECT_EQ(usage["hearth_cache"]["tier"], "shared") << usage.dump();
      // Up to the last prompt's generation start: its end less the assistant header.
      EXPECT_GE(cached, prompt_before - 8) << usage.dump();
    }
    prompt_before = usage["prompt_tokens"].get<int>();
    messages.push_back({{"role", "assistant"}, {"content", "A scripted answer, number " + std::to_string(turn) + "."}});
    messages.push_back({{"role", "user"}, {"content", "Go on, part " + std::to_string(turn) + "."}});
    ASSERT_TRUE(WaitForWrites(*shared, written)) << "the replica wrote nothing to the shared tier";
  }
}

// The shared tier down: the other replica answers anyway, prefilling what it must, and
// the response and the log say why it did not resume.
TEST(SharedTierTest, AStoreThatIsDownCostsARecomputeAndSaysWhy) {
  auto shared = std::make_shared<cache::MemorySharedStore>();
  TestServer a(Config(shared), Http()), b(Config(shared), Http());
  ASSERT_TRUE(a.ok() && b.ok());
  json messages = {{{"role", "system"}, {"content", "You answer briefly. " + std::string(400, 's')}},
                   {{"role", "user"}, {"content", "Hello?"}}};
  json reply = PostGreedyChat(a.client(), messages, 6);
  messages.push_back({{"role", "assistant"}, {"content", reply["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "Go on."}});
  ASSERT_TRUE(WaitForWrites(*shared, 0));
  shared->SetDown(true);
  ::testing::internal::CaptureStderr();
  json r = PostGreedyChat(b.client(), messages, 6);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << r.dump();
  EXPECT_NE(r["usage"]["hearth_cache"].value("shared_miss", "").find("store unavailable"), std::string::npos) << r.dump();
  EXPECT_NE(log.find("hearth: shared tier: store unavailable"), std::string::npos) << log;
  shared->SetDown(false);  // back: the next replica resumes from it again
  messages.back()["content"] = "Go on, please.";
  r = PostGreedyChat(b.client(), messages, 6);
  EXPECT_GT(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << r.dump();
}

}  // namespace
}  // namespace hearth::server
