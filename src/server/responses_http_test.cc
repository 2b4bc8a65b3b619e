// POST /v1/responses on the tiny hybrid model: a second turn, sent as input items or by
// previous_response_id, resumes from the cache; stored responses stay within their key.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/test_server.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

class ResponsesHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig ec;
    ec.context.n_ctx = 4096;
    ec.context.n_threads = 1;
    ec.context.n_seq_max = 4;
    ec.n_parallel = 1;
    HttpConfig hc;
    hc.warm_ahead = false;  // only what requests themselves leave behind
    hc.api_keys = MakeApiKeys({"key-alpha", "key-beta"}, "test-secret");
    server_ = std::make_unique<TestServer>(ec, hc);
    ASSERT_TRUE(server_->ok());
  }

  // The reply's status and body (the parsed JSON, or the SSE text as a string).
  std::pair<int, json> Post(json body, const std::string& key = "key-alpha") {
    body["model"] = "m";
    body["temperature"] = 0;
    body["max_output_tokens"] = 3;
    auto res = server_->client().Post("/v1/responses", {{"Authorization", "Bearer " + key}}, body.dump(),
                                      "application/json");
    if (!res) return {0, json()};
    if (res->get_header_value("Content-Type").starts_with("text/event-stream")) return {res->status, res->body};
    return {res->status, json::parse(res->body)};
  }

  static int Cached(const json& r) { return r["usage"]["input_tokens_details"]["cached_tokens"].get<int>(); }
  static int Prefilled(const json& r) { return r["usage"]["hearth_cache"]["prefilled_tokens"].get<int>(); }
  static int Input(const json& r) { return r["usage"]["input_tokens"].get<int>(); }

  std::unique_ptr<TestServer> server_;
};

const std::string kInstructions = "You are a careful assistant. " + std::string(300, 'x');

TEST_F(ResponsesHttpTest, SecondTurnByItemsIsReadFromTheCache) {
  const json user1 = {{"role", "user"}, {"content", "What is a prefix tree?"}};
  auto [s1, r1] = Post({{"instructions", kInstructions}, {"input", json::array({user1})}});
  ASSERT_EQ(s1, 200) << r1.dump();
  EXPECT_EQ(Cached(r1), 0);
  ASSERT_FALSE(r1["output"].empty());

  // The client sends everything back: its input, the output items as they came, a new turn.
  json input = json::array({user1});
  for (const json& item : r1["output"]) input.push_back(item);
  input.push_back(
      {{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "And a radix tree?"}}})}});
  auto [s2, r2] = Post({{"instructions", kInstructions}, {"input", input}});
  ASSERT_EQ(s2, 200) << r2.dump();
  const int n_new = Input(r2) - Input(r1);  // the reply as re-rendered, and the new turn
  EXPECT_GE(Cached(r2), Input(r1) - 8) << r2["usage"].dump();
  EXPECT_LE(Prefilled(r2), n_new + 8) << r2["usage"].dump();
}

TEST_F(ResponsesHttpTest, SecondTurnByPreviousResponseIdIsReadFromTheCache) {
  auto [s1, r1] = Post({{"instructions", kInstructions}, {"input", "What is a prefix tree?"}, {"stream", true}});
  ASSERT_EQ(s1, 200);
  // The id is in the stream's first event; the response is stored before the stream ends.
  const std::string sse = r1.get<std::string>();
  const size_t at = sse.find("data: ");
  ASSERT_NE(at, std::string::npos) << sse;
  const json created = json::parse(sse.substr(at + 6, sse.find('\n', at) - at - 6));
  ASSERT_EQ(created["type"], "response.created");
  const std::string id = created["response"]["id"];
  const size_t last = sse.rfind("data: ");
  const json completed = json::parse(sse.substr(last + 6, sse.find('\n', last) - last - 6));
  ASSERT_TRUE(completed["type"] == "response.completed" || completed["type"] == "response.incomplete") << sse;
  const int input1 = Input(completed["response"]);

  auto [s2, r2] = Post({{"instructions", kInstructions}, {"previous_response_id", id}, {"input", "And a radix tree?"}});
  ASSERT_EQ(s2, 200) << r2.dump();
  EXPECT_EQ(r2["previous_response_id"], id);
  EXPECT_GE(Input(r2), input1 + 3) << "the first turn and its reply are in the prompt";
  EXPECT_GE(Cached(r2), input1 - 8) << r2["usage"].dump();
  EXPECT_LE(Prefilled(r2), Input(r2) - input1 + 8) << r2["usage"].dump();

  // A third turn chains through the second.
  auto [s3, r3] = Post({{"instructions", kInstructions}, {"previous_response_id", r2["id"]}, {"input", "Thanks."}});
  ASSERT_EQ(s3, 200) << r3.dump();
  EXPECT_GE(Cached(r3), Input(r2) - 8) << r3["usage"].dump();
}

TEST_F(ResponsesHttpTest, UnknownOrForeignPreviousResponseIsABadRequest) {
  auto [s1, r1] = Post({{"input", "Hello."}});
  ASSERT_EQ(s1, 200) << r1.dump();
  for (const auto& [key, id] : std::vector<std::pair<std::string, std::string>>{
           {"key-alpha", "resp_nope"}, {"key-beta", r1["id"].get<std::string>()}}) {
    auto [status, r] = Post({{"previous_response_id", id}, {"input", "Again."}}, key);
    EXPECT_EQ(status, 400) << key << " " << id;
    EXPECT_EQ(r["error"]["type"], "invalid_request_error");
    EXPECT_EQ(r["error"]["param"], "previous_response_id");
  }
  // store: false keeps nothing to continue from.
  auto [s2, r2] = Post({{"input", "Hello."}, {"store", false}});
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(Post({{"previous_response_id", r2["id"]}, {"input", "Again."}}).first, 400);
  // Bad input is a 400 in OpenAI's shape.
  auto [s3, r3] = Post({{"input", json::array({{{"type", "function_call_output"}}})}});
  EXPECT_EQ(s3, 400);
  EXPECT_EQ(r3["error"]["param"], "input[0].call_id");
}

// GET and DELETE /v1/responses/{id}: what the client got, under its own key only; a
// deleted response is gone for GET and previous_response_id alike.
TEST_F(ResponsesHttpTest, StoredResponsesAreReadAndDeletedUnderTheirKey) {
  auto call = [&](const std::string& method, const std::string& id, const std::string& key = "key-alpha") {
    const httplib::Headers headers = {{"Authorization", "Bearer " + key}};
    auto res = method == "GET" ? server_->client().Get("/v1/responses/" + id, headers)
                               : server_->client().Delete("/v1/responses/" + id, headers);
    if (!res) return std::pair<int, json>{0, json()};
    return std::pair<int, json>{res->status, json::parse(res->body, nullptr, false)};
  };
  auto [s1, whole] = Post({{"input", "Hello."}});
  ASSERT_EQ(s1, 200) << whole.dump();
  const std::string id = whole["id"];
  auto [g1, got] = call("GET", id);
  EXPECT_EQ(g1, 200);
  EXPECT_EQ(got, whole) << "the response as it was answered, item ids included";

  auto [s2, sse] = Post({{"input", "Hello."}, {"stream", true}});
  ASSERT_EQ(s2, 200);
  const std::string text = sse.get<std::string>();
  const size_t last = text.rfind("data: ");
  const json completed = json::parse(text.substr(last + 6, text.find('\n', last) - last - 6));
  auto [g2, streamed] = call("GET", completed["response"]["id"]);
  EXPECT_EQ(g2, 200);
  EXPECT_EQ(streamed, completed["response"]) << "a streamed one as its last event carried it";

  for (const std::string method : {"GET", "DELETE"}) {
    for (const auto& [key, which] : std::vector<std::pair<std::string, std::string>>{{"key-beta", id}, {"key-alpha", "resp_nope"}}) {
      auto [status, r] = call(method, which, key);
      EXPECT_EQ(status, 404) << method << " " << key << " " << which;
      EXPECT_EQ(r["error"]["type"], "invalid_request_error");
      EXPECT_EQ(r["error"]["message"], "Response with id '" + which + "' not found.");
    }
  }
  EXPECT_EQ(call("GET", id).first, 200) << "another key's delete left it";

  auto [d1, deleted] = call("DELETE", id);
  EXPECT_EQ(d1, 200);
  EXPECT_EQ(deleted, (json{{"id", id}, {"object", "response"}, {"deleted", true}}));
  EXPECT_EQ(call("GET", id).first, 404);
  EXPECT_EQ(call("DELETE", id).first, 404);
  EXPECT_EQ(Post({{"previous_response_id", id}, {"input", "Again."}}).first, 400);
}

}  // namespace
}  // namespace hearth::server
