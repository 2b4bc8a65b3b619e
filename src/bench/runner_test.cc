#include "bench/runner.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <thread>

namespace hearth::bench {
namespace {

using std::chrono::milliseconds;

const std::chrono::steady_clock::time_point kReplied = std::chrono::steady_clock::time_point(std::chrono::seconds(100));

TEST(ThinkWaitTest, WaitsTheWholePauseRightAfterTheReply) {
  EXPECT_EQ(ThinkWait(kReplied, kReplied, milliseconds(1500)), milliseconds(1500));
}

TEST(ThinkWaitTest, TimeSpentOnOtherSessionsCountsTowardsThePause) {
  EXPECT_EQ(ThinkWait(kReplied, kReplied + milliseconds(400), milliseconds(1500)), milliseconds(1100));
}

TEST(ThinkWaitTest, NoWaitOnceThePauseHasPassed) {
  EXPECT_EQ(ThinkWait(kReplied, kReplied + milliseconds(1500), milliseconds(1500)), milliseconds(0));
  EXPECT_EQ(ThinkWait(kReplied, kReplied + milliseconds(9000), milliseconds(1500)), milliseconds(0));
}

TEST(ThinkWaitTest, NoPauseAsked) {
  EXPECT_EQ(ThinkWait(kReplied, kReplied, milliseconds(0)), milliseconds(0));
}

TEST(FollowUpPauseTest, UserThinkPausesOnlyBeforeUserMessages) {
  RunOptions options;
  options.think = milliseconds(200);
  options.user_think = milliseconds(3000);
  TurnPlan user, tool;
  tool.tool_results = true;
  EXPECT_EQ(FollowUpPause(user, options), milliseconds(3000));
  EXPECT_EQ(FollowUpPause(tool, options), milliseconds(200)) << "a tool answers after --think-ms";
  options.user_think = milliseconds(100);
  EXPECT_EQ(FollowUpPause(user, options), milliseconds(200)) << "the longer of the two";
}

// An OpenAI-shaped server that answers every chat request with one streamed word, and
// notes when each request arrived.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"data":[{"id":"m","owned_by":"fake"}]})", "application/json");
    });
    server_.Post("/v1/chat/completions", [this](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        arrivals_.push_back(std::chrono::steady_clock::now());
      }
      res.set_content("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
                      "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    server_.wait_until_ready();
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::chrono::steady_clock::time_point> arrivals() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrivals_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
};

TEST(RunnerThinkTest, EachFollowUpWaitsThePauseAfterThePreviousReply) {
  FakeServer fake;
  RunOptions options;
  options.warmup = 0;
  options.progress = false;
  options.think = milliseconds(300);
  // The fake renders nothing: new tokens go uncounted, which this test does not need.
  Runner runner({{"fake", fake.url()}}, RenderSource{}, options);
  ASSERT_TRUE(runner.Start().ok());
  WorkloadSpec spec;
  spec.n_turns = 3;
  spec.system_tokens = 20;
  spec.user_tokens = 10;
  runner.Run(MakeWorkload(spec));
  const auto arrivals = fake.arrivals();
  ASSERT_EQ(arrivals.size(), 3u);
  for (size_t i = 1; i < arrivals.size(); ++i) {
    EXPECT_GE(arrivals[i] - arrivals[i - 1], milliseconds(300)) << "turn " << i;
  }
  EXPECT_EQ(runner.Environment()["options"]["think_ms"], 300);
}

}  // namespace
}  // namespace hearth::bench
