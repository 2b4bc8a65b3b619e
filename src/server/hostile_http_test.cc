// Hostile HTTP against the real `hearth serve` on the tiny model: every request of
// testing/hostile_requests.h (over 300 per API surface) must get a clear 4xx in its
// route's error shape, as valid UTF-8 JSON; no 5xx, no dropped connection, no hang. After
// all of them the process still runs, /health is ok and valid requests are answered.
// The answers are tallied by status and error type (docs/reliability.md, Hostile HTTP).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "base/utf8.h"
#include "testing/hostile_requests.h"
#include "testing/raw_http.h"
#include "testing/serve_process.h"
#include "testing/test_env.h"

namespace hearth::testing {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr size_t kMaxBody = 64 * 1024;
constexpr size_t kMinCasesPerSurface = 300;
constexpr int kClients = 4;
const std::vector<Surface> kSurfaces = {Surface::kChat,        Surface::kCompletions, Surface::kMessages,
                                        Surface::kCountTokens, Surface::kUtility,     Surface::kRoutes};

// What is wrong with the answer to `c`, if anything; *answer_class gets "400
// invalid_request_error" or the like.
std::optional<std::string> Judge(const HostileCase& c, const RawResponse& res, std::string* answer_class) {
  if (res.outcome != RawResponse::Outcome::kAnswered) {
    *answer_class = OutcomeName(res.outcome);
    if (c.may_close && res.outcome == RawResponse::Outcome::kDropped) {
      *answer_class = "closed (not HTTP)";
      return std::nullopt;
    }
    return std::string("no answer: ") + OutcomeName(res.outcome);
  }
  *answer_class = std::to_string(res.status);
  const std::string status = "HTTP " + std::to_string(res.status) + " " + res.body.substr(0, 300);
  if (!IsValidUtf8(res.body)) return "a body that is not valid UTF-8: " + status;
  const json j = json::parse(res.body, nullptr, false);
  const bool anthropic = c.path.empty() ? j.is_object() && j.contains("type") : IsAnthropicRoute(c.path);
  const json* error = j.is_object() && j.contains("error") && j["error"].is_object() ? &j["error"] : nullptr;
  if (error != nullptr && error->contains("type") && (*error)["type"].is_string()) {
    *answer_class += " " + (*error)["type"].get<std::string>();
  }
  if (res.status < 400 || res.status > 499) return "not a 4xx: " + status;
  if (!res.content_type.starts_with("application/json")) return "Content-Type " + res.content_type + ": " + status;
  if (error == nullptr) return "no error object: " + status;
  const bool has_message = error->contains("message") && (*error)["message"].is_string() &&
                           !(*error)["message"].get<std::string>().empty();
  const bool has_type = error->contains("type") && (*error)["type"].is_string();
  if (!has_message || !has_type) return "an error without message and type: " + status;
  if (anthropic) {
    if (!(j.contains("type") && j["type"] == "error")) return "not the Anthropic shape: " + status;
  } else if (!error->contains("param") || !error->contains("code") || j.contains("type")) {
    return "not the OpenAI shape: " + status;
  }
  return std::nullopt;
}

struct Tally {
  std::map<std::string, std::map<Surface, int>> by_class;
  std::map<Surface, int> per_surface;
  std::map<std::string, std::vector<std::string>> failures;  // by group and answer: examples
  std::map<std::string, int> n_failures_by_group;
  int n_failures = 0;
};

void PrintTable(const Tally& t) {
  std::printf("\n| answer | chat | completions | messages | count_tokens | utility | routes | total |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  auto row = [](const std::string& name, const std::map<Surface, int>& counts) {
    int total = 0;
    std::printf("| %s |", name.c_str());
    for (Surface s : kSurfaces) {
      const auto it = counts.find(s);
      const int n = it == counts.end() ? 0 : it->second;
      total += n;
      std::printf(" %d |", n);
    }
    std::printf(" %d |\n", total);
  };
  for (const auto& [name, counts] : t.by_class) row(name, counts);
  row("**all**", t.per_surface);
  std::fflush(stdout);
}

// A valid request still gets a real answer.
json Post(int port, const std::string& path, const std::string& body, int* status) {
  const RawResponse res = Exchange(port, MakeRequest("POST", path, body), milliseconds(120000));
  *status = res.outcome == RawResponse::Outcome::kAnswered ? res.status : 0;
  return json::parse(res.body, nullptr, false);
}

TEST(HostileHttpTest, EveryHostileRequestIsAClear4xxAndTheServerServesOn) {
  const std::string dir = MakeTempDir();
  const std::string log = dir + "/serve.log";
  ServeProcess serve({HearthBin(), "serve", "-m", TestModelPath("qwen35"), "--port", "0", "-c", "4096", "-t", "1",
                      "-P", "2", "--no-warm-ahead", "--max-body", std::to_string(kMaxBody)},
                     log);
  const std::optional<int> port = serve.WaitForPort(std::chrono::seconds(120));
  ASSERT_TRUE(port.has_value()) << ReadFile(log);

  const std::vector<HostileCase> cases = MakeHostileCases(kMaxBody);
  std::vector<RawResponse> answers(cases.size());
  // Cases that wait out the server's read timeout (10 s) run all at once, the rest
  // kClients at a time.
  std::vector<std::thread> clients;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].waits_for_timeout) continue;
    clients.emplace_back([&, i] { answers[i] = Exchange(*port, cases[i].bytes, milliseconds(30000)); });
  }
  std::atomic<size_t> next{0};
  for (int k = 0; k < kClients; ++k) {
    clients.emplace_back([&] {
      for (size_t i = next++; i < cases.size(); i = next++) {
        if (!cases[i].waits_for_timeout) answers[i] = Exchange(*port, cases[i].bytes, milliseconds(20000));
      }
    });
  }
  for (std::thread& t : clients) t.join();

  Tally tally;
  for (size_t i = 0; i < cases.size(); ++i) {
    const HostileCase& c = cases[i];
    std::string answer_class;
    const std::optional<std::string> wrong = Judge(c, answers[i], &answer_class);
    ++tally.by_class[answer_class][c.surface];
    ++tally.per_surface[c.surface];
    if (!wrong) continue;
    ++tally.n_failures;
    ++tally.n_failures_by_group[c.group];
    auto& examples = tally.failures[c.group + " (" + answer_class + ")"];
    if (examples.size() < 5) examples.push_back(c.path + " " + c.what + " -> " + *wrong);
  }
  PrintTable(tally);
  for (const auto& [group, n] : tally.n_failures_by_group) ADD_FAILURE() << n << " wrong answers to " << group << " cases";
  for (const auto& [group, examples] : tally.failures) {
    for (const std::string& e : examples) ADD_FAILURE() << group << ": " << e;
  }
  EXPECT_EQ(tally.n_failures, 0) << "of " << cases.size() << " hostile requests";
  for (Surface s : kSurfaces) EXPECT_GE(tally.per_surface[s], kMinCasesPerSurface) << SurfaceName(s);

  ASSERT_TRUE(serve.Running()) << serve.exit_description() << "\n" << ReadFile(log);
  const RawResponse health = Exchange(*port, MakeRequest("GET", "/health", ""), milliseconds(10000));
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  int status = 0;
  json chat = Post(*port, "/v1/chat/completions",
                   R"({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3, "temperature": 0})",
                   &status);
  EXPECT_EQ(status, 200) << chat.dump();
  EXPECT_TRUE(chat["choices"][0]["message"]["content"].is_string()) << chat.dump();
  EXPECT_GE(chat["usage"]["completion_tokens"].get<int>(), 1) << chat.dump();
  json message = Post(*port, "/v1/messages",
                      R"({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3, "temperature": 0})",
                      &status);
  EXPECT_EQ(status, 200) << message.dump();
  EXPECT_EQ(message["type"], "message") << message.dump();
  EXPECT_GE(message["usage"]["output_tokens"].get<int>(), 1) << message.dump();
  EXPECT_TRUE(serve.Running()) << serve.exit_description();
}

}  // namespace
}  // namespace hearth::testing
