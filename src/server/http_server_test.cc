// The HTTP layer on the tiny hybrid model: authentication and per-key cache isolation,
// stream usage, bad request bodies, and slow clients (loopback only).
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "server/test_server.h"
#include "testing/raw_http.h"

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

// A server with the defaults a test can afford: no keys, no warm-ahead.
class HttpServerTest : public ::testing::Test {
 protected:
  static HttpConfig Config() {
    HttpConfig hc;
    hc.warm_ahead = false;
    return hc;
  }
  bool Start(HttpConfig hc) {
    EngineConfig ec;
    ec.context.n_ctx = 4096;
    ec.context.n_threads = 1;
    ec.context.n_seq_max = 4;
    ec.n_parallel = 2;
    server_ = std::make_unique<TestServer>(ec, hc);
    return server_->ok();
  }
  // Waits until the pool has accepted `accepted` connections and its workers have taken
  // up `taken`; false after a deadline that only guards against a hang.
  bool WaitForConnections(int64_t accepted, int64_t taken) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const HttpServer::ConnectionCounts n = server_->http().connections();
      if (n.accepted >= accepted && n.taken >= taken) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  std::unique_ptr<TestServer> server_;
};

// The events of an SSE body, by name, in order.
std::vector<std::pair<std::string, json>> SseEvents(const std::string& body) {
  std::vector<std::pair<std::string, json>> events;
  std::string name;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(at, end - at);
    at = end + 1;
    if (line.starts_with("event: ")) name = line.substr(7);
    if (line.starts_with("data: ")) events.emplace_back(name, json::parse(line.substr(6)));
  }
  return events;
}

// Anthropic streams report the cache in message_start, as the real API does: a client
// reading usage there (Claude Code) sees the reuse, not the whole prompt as input.
TEST_F(HttpServerTest, AnthropicStreamReportsTheCacheInMessageStart) {
  ASSERT_TRUE(Start(Config()));
  json body = {{"model", "m"},
               {"max_tokens", 3},
               {"stream", true},
               {"temperature", 0},
               {"system", "You are terse. " + std::string(300, 's')},
               {"messages", {{{"role", "user"}, {"content", "Name a colour."}}}}};
  int read_at_start[2] = {-1, -1};
  for (int turn = 0; turn < 2; ++turn) {
    SCOPED_TRACE(turn);
    auto res = server_->client().Post("/v1/messages", body.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    const auto events = SseEvents(res->body);
    ASSERT_GE(events.size(), 3u) << res->body;
    ASSERT_EQ(events.front().first, "message_start") << res->body;
    const json& start = events.front().second["message"]["usage"];
    const json* end = nullptr;
    for (const auto& [name, data] : events) {
      if (name == "message_delta") end = &data["usage"];
    }
    ASSERT_NE(end, nullptr) << res->body;
    EXPECT_EQ(start["cache_read_input_tokens"], (*end)["cache_read_input_tokens"]) << res->body;
    EXPECT_EQ(start["input_tokens"], (*end)["input_tokens"]) << res->body;
    EXPECT_EQ(start["output_tokens"], 0);
    read_at_start[turn] = start["cache_read_input_tokens"];
  }
  EXPECT_EQ(read_at_start[0], 0);
  EXPECT_GT(read_at_start[1], 100) << "the second turn's message_start reports its reuse";
}

// cache_creation_input_tokens is what the request wrote: on a cold cache, every prompt
// token (the cache then holds a state at the prompt's end, as /v1/cache shows), so the
// three counts still add up to the prompt; streams say the same in message_start and
// message_delta.
TEST_F(HttpServerTest, AnthropicCacheCreationIsWhatTheRequestStored) {
  ASSERT_TRUE(Start(Config()));
  json body = {{"model", "m"},
               {"max_tokens", 2},
               {"temperature", 0},
               {"system", "You are terse. " + std::string(200, 'q')},
               {"messages", {{{"role", "user"}, {"content", "Name a colour."}}}}};
  auto res = server_->client().Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  const json usage = json::parse(res->body)["usage"];
  const int written = usage["cache_creation_input_tokens"];
  EXPECT_EQ(usage["cache_read_input_tokens"], 0);
  EXPECT_GT(written, 50);
  EXPECT_EQ(usage["input_tokens"], 0) << res->body;
  EXPECT_EQ(usage["hearth_cache"]["written_tokens"], written);
  EXPECT_EQ(usage["hearth_cache"]["prefilled_tokens"], written) << "the whole prompt was prefilled and kept";
  bool stored = false;
  for (int i = 0; i < 40 && !stored; ++i) {
    auto cache = server_->client().Get("/v1/cache");
    ASSERT_TRUE(cache && cache->status == 200);
    const json summary = json::parse(cache->body);
    for (const auto& c : summary["conversations"]) {
      for (const auto& st : c["states"]) stored = stored || st["position"] == written;
    }
    if (!stored) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(stored) << "a state at the prompt's end, position " << written;

  body["stream"] = true;
  body["system"] = "You are brief. " + std::string(200, 'z');
  res = server_->client().Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  const auto events = SseEvents(res->body);
  ASSERT_FALSE(events.empty());
  const json start = events.front().second["message"]["usage"];
  json end;
  for (const auto& [name, data] : events) {
    if (name == "message_delta") end = data["usage"];
  }
  EXPECT_GT(start["cache_creation_input_tokens"].get<int>(), 50) << res->body;
  EXPECT_EQ(start["cache_creation_input_tokens"], end["cache_creation_input_tokens"]) << res->body;
}

// A wrongly typed field is a 400 in the route's API shape, naming the field, on every
// route that reads a body; the server goes on serving.
TEST_F(HttpServerTest, WronglyTypedFieldsAreBadRequests) {
  ASSERT_TRUE(Start(Config()));
  const std::string user = R"([{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/tokenize", R"({"content": 5})"},
      {"/tokenize", R"({"content": "x", "add_special": "yes"})"},
      {"/tokenize", R"({"content": "x", "parse_special": [true]})"},
      {"/detokenize", R"({"tokens": "x"})"},
      {"/detokenize", R"({"tokens": [1, "2"]})"},
      {"/detokenize", R"({"tokens": [4294967296]})"},
      {"/apply-template", R"({"messages": "x"})"},
      {"/apply-template", R"({"messages": )" + user + R"(, "add_generation_prompt": "no"})"},
      {"/v1/chat/completions", R"({"messages": )" + user + R"(, "max_tokens": "2"})"},
      {"/v1/completions", R"({"prompt": 5})"},
      {"/v1/messages", R"({"max_tokens": 2, "messages": "x"})"},
      {"/v1/messages/count_tokens", R"({"messages": )" + user + R"(, "system": 5})"},
  };
  for (const auto& [path, body] : cases) {
    SCOPED_TRACE(path + " " + body);
    auto res = server_->client().Post(path, body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    const json err = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << res->body;
    if (path.starts_with("/v1/messages")) {
      EXPECT_EQ(err["type"], "error") << res->body;
      EXPECT_EQ(err["error"]["type"], "invalid_request_error") << res->body;
    } else {
      EXPECT_EQ(err["error"]["type"], "invalid_request_error") << res->body;
      EXPECT_FALSE(err["error"]["param"].is_null()) << res->body;
    }
  }
  auto ok = server_->client().Post("/tokenize", R"({"content": "hi", "add_special": false})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_FALSE(json::parse(ok->body)["tokens"].empty());
}

// What hearth cannot read as declared is refused before any handler, in the route's
// shape: a body of another media type or an unknown coding (415), a head past its
// bounds (431 for the headers' sum, 414 for the target). JSON with parameters, or with
// no Content-Type at all, is read.
TEST_F(HttpServerTest, UnreadableRequestsAreRefusedInTheRoutesShape) {
  ASSERT_TRUE(Start(Config()));
  httplib::Client& c = server_->client();
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})";
  const std::string tokenize = R"({"content": "hi"})";
  auto status_and_shape = [](const httplib::Result& res) -> std::pair<int, std::string> {
    if (!res) return {0, "no answer"};
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_object() && j.value("type", "") == "error" && j["error"].is_object()) return {res->status, "anthropic"};
    if (j.is_object() && j.contains("error") && j["error"].contains("param")) return {res->status, "openai"};
    return {res->status, res->body};
  };
  EXPECT_EQ(status_and_shape(c.Post("/v1/chat/completions", chat, "application/x-www-form-urlencoded")),
            std::make_pair(415, std::string("openai")));
  EXPECT_EQ(status_and_shape(c.Post("/v1/messages", chat, "text/plain")), std::make_pair(415, std::string("anthropic")));
  EXPECT_EQ(status_and_shape(c.Post("/tokenize", {{"Content-Encoding", "rot13"}}, tokenize, "application/json")),
            std::make_pair(415, std::string("openai")));
  httplib::Headers heavy;
  for (int i = 0; i < 10; ++i) heavy.emplace("X-Big-" + std::to_string(i), std::string(8000, 'b'));
  EXPECT_EQ(status_and_shape(c.Post("/v1/messages", heavy, chat, "application/json")),
            std::make_pair(431, std::string("anthropic")));
  EXPECT_EQ(status_and_shape(c.Post("/v1/chat/completions?q=" + std::string(9000, 'q'), chat, "application/json")),
            std::make_pair(414, std::string("openai")));
  auto with_charset = c.Post("/tokenize", tokenize, "application/json; charset=utf-8");
  ASSERT_TRUE(with_charset);
  EXPECT_EQ(with_charset->status, 200) << with_charset->body;
  // httplib's client always names a type (text/plain by default): raw bytes here.
  const testing::RawResponse untyped =
      testing::Exchange(server_->port(), testing::MakeRequest("POST", "/tokenize", tokenize, ""), std::chrono::seconds(10));
  EXPECT_EQ(untyped.status, 200) << untyped.body;
}

// A loopback connection that sends `bytes` and then nothing, held open until destroyed.
class SlowConnection {
 public:
  SlowConnection(int port, const std::string& bytes) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (connected_ && !bytes.empty()) connected_ = ::send(fd_, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size());
  }
  ~SlowConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  SlowConnection(const SlowConnection&) = delete;
  SlowConnection& operator=(const SlowConnection&) = delete;
  bool connected() const { return connected_; }
  // True when the server closed the connection within `seconds` (nothing to read, EOF
  // or a reset); false when it is still open then.
  bool ClosedByServerWithin(int seconds) const {
    timeval tv{seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Slow clients cannot starve the others: more connections than the pool has workers,
// some silent, some trickling a request's first bytes, and a normal request is still
// served within a few read timeouts.
TEST_F(HttpServerTest, SlowConnectionsDoNotStarveOthers) {
  HttpConfig hc = Config();
  hc.n_http_threads = 2;
  hc.max_pending_connections = 16;
  hc.read_timeout_s = 1;
  ASSERT_TRUE(Start(hc));
  std::vector<std::unique_ptr<SlowConnection>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<SlowConnection>(server_->port(), i % 3 == 0 ? "" : "POST /tokenize HTTP/1.1\r\nHo"));
    ASSERT_TRUE(slow.back()->connected());
  }
  ASSERT_TRUE(WaitForConnections(6, 2)) << "all accepted before the normal one";
  httplib::Client c("127.0.0.1", server_->port());
  c.set_read_timeout(20, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = c.Get("/health");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(res) << "no answer within 20 s behind " << slow.size() << " slow connections";
  EXPECT_EQ(res->status, 200);
  // Three rounds of two workers, each dropping its slow client after 1 s.
  // Three rounds of two workers, each holding a slow client for at most two read timeouts
  // (its request's, then httplib's keep-alive wait after answering it 400): about 6 s.
  EXPECT_LT(waited, 10.0);
}

// Beyond the pool and its queue of pending connections, a new connection is closed at
// once rather than left waiting.
TEST_F(HttpServerTest, ConnectionsBeyondThePendingBoundAreClosed) {
  HttpConfig hc = Config();
  hc.n_http_threads = 1;
  hc.max_pending_connections = 1;
  hc.read_timeout_s = 30;  // the held ones stay held for the whole test
  ASSERT_TRUE(Start(hc));
  const std::string partial = "POST /tokenize HTTP/1.1\r\nHo";
  SlowConnection held(server_->port(), partial);  // the one worker
  ASSERT_TRUE(WaitForConnections(1, 1)) << "the worker did not take the first connection";
  SlowConnection pending(server_->port(), partial);  // the one place in the queue
  ASSERT_TRUE(WaitForConnections(2, 1)) << "the second connection was not queued";
  SlowConnection refused(server_->port(), partial);
  ASSERT_TRUE(held.connected() && pending.connected());
  EXPECT_TRUE(refused.ClosedByServerWithin(10));
  EXPECT_FALSE(pending.ClosedByServerWithin(1));
}

// A sequence holds at most n_ctx_seq positions (the training context when the cells
// exceed it), whatever room the cells have: prompt and max_tokens are checked against it.
TEST(HttpServerSeqLimitTest, PromptsAndRepliesFitTheSequenceLimit) {
  EngineConfig ec;
  ec.context.n_ctx = 4096;
  ec.context.n_threads = 1;
  ec.context.n_seq_max = 2;
  ec.n_parallel = 1;
  ec.n_ctx_seq = 512;
  HttpConfig hc;
  hc.warm_ahead = false;
  TestServer server(ec, hc);
  ASSERT_TRUE(server.ok());
  auto ask = [&](const std::string& text, int max_tokens) {
    json body = {{"model", "m"}, {"max_tokens", max_tokens}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    return server.client().Post("/v1/chat/completions", body.dump(), "application/json");
  };
  auto long_prompt = ask(std::string(3000, 'x') + " " + std::string(3000, 'y'), 1);
  ASSERT_TRUE(long_prompt);
  EXPECT_EQ(long_prompt->status, 400) << long_prompt->body;
  EXPECT_NE(long_prompt->body.find("the context holds 512"), std::string::npos) << long_prompt->body;
  auto long_reply = ask("Hello.", 1000);
  ASSERT_TRUE(long_reply);
  EXPECT_EQ(long_reply->status, 400) << long_reply->body;
  EXPECT_NE(long_reply->body.find("max_tokens is 1000"), std::string::npos) << long_reply->body;
  auto fits = ask("Hello.", 2);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

// /metrics histograms count what the engine reports for each finished request: a first
// turn and a second that resumes from the device tier.
TEST_F(HttpServerTest, MetricsHistogramsCountFinishedRequests) {
  ASSERT_TRUE(Start(Config()));
  json body = {{"messages", {{{"role", "system"}, {"content", std::string(200, 'k')}}, {{"role", "user"}, {"content", "Hi"}}}},
               {"max_tokens", 2},
               {"temperature", 0}};
  for (int i = 0; i < 2; ++i) {
    auto res = server_->client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200);
  }
  auto res = server_->client().Get("/metrics");
  ASSERT_TRUE(res && res->status == 200);
  const std::string& text = res->body;
  for (const char* line : {"hearth_time_to_first_token_seconds_count 2\n", "hearth_request_prefill_seconds_count 2\n",
                           "hearth_request_decode_seconds_count 2\n", "hearth_request_queue_wait_seconds_count 2\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in:\n" << text;
  }
  int n_restores = 0;  // the second request's, from whichever tier kept the first's state
  for (const char* tier : {"device", "ram", "disk"}) {
    const std::string name = std::string("hearth_cache_restore_seconds_count{tier=\"") + tier + "\"} ";
    const size_t at = text.find(name);
    ASSERT_NE(at, std::string::npos) << name;
    n_restores += std::stoi(text.substr(at + name.size()));
  }
  EXPECT_EQ(n_restores, 1) << text;
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

int64_t MetricValue(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

// A follow-up sent once warm-ahead has rendered the conversation gets its prompt spliced
// into that rendering, and /metrics counts it (that the splice equals the whole render is
// splice_render_test's and warm_ahead_test's).
TEST_F(HttpServerTest, AFollowUpIsSplicedIntoWarmAheadsRendering) {
  HttpConfig hc = Config();
  hc.warm_ahead = true;
  ASSERT_TRUE(Start(hc));
  json first = {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
                {"max_tokens", 4},
                {"temperature", 0},
                {"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto res = server_->client().Post("/v1/chat/completions", first.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  const json reply = json::parse(res->body)["choices"][0]["message"];
  ASSERT_FALSE(reply.contains("tool_calls") && !reply["tool_calls"].empty()) << reply;
  auto metrics = [&] {
    auto m = server_->client().Get("/metrics");
    return m && m->status == 200 ? m->body : std::string();
  };
  // Warm-ahead has rendered the next request once its task is submitted.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (MetricValue(metrics(), "hearth_warm_ahead_tasks_total") < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t spliced = MetricValue(metrics(), "hearth_renders_spliced_total");
  ASSERT_GE(spliced, 0);
  json next = first;
  next["messages"].push_back({{"role", "assistant"}, {"content", reply["content"]}});
  next["messages"].push_back({{"role", "user"}, {"content", "  And then?\n"}});
  auto spliced_res = server_->client().Post("/v1/chat/completions", next.dump(), "application/json");
  ASSERT_TRUE(spliced_res && spliced_res->status == 200);
  EXPECT_EQ(MetricValue(metrics(), "hearth_renders_spliced_total"), spliced + 1);

}

}  // namespace
}  // namespace hearth::server
