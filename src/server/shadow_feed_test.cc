// Where shadow tokens go (EngineConfig::shadow_feed): beside the reply's decode steps, or
// only when the reply ends. Either way the next turn, sent at once, finds its re-rendered
// form of the reply in the cache.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/test_server.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

struct Turn {
  int64_t shadow_tokens = 0;       // fed during the first request, its end included
  int64_t with_decode = 0;         // of those, in its decode steps
  int64_t kept = 0;                // shadows given to the cache
  int64_t renders = 0;             // targets asked for during the first request
  int follow_up_prefilled = 0;     // the follow-up's prompt tokens computed
  int follow_up_new = 0;           // ... and its own new tokens (message and glue)
};

// One 40-token reply, then the follow-up at once (no idle time for warm-ahead).
Turn RunTurn(ShadowFeed feed) {
  EngineConfig ec = OneSlotConfig();
  ec.shadow_feed = feed;
  ec.shadow_wait_ms = 5000;  // every shadow render lands before the next token: deterministic
  HttpConfig hc;
  hc.model_alias = "tiny";
  TestServer server(ec, hc);
  Turn out;
  if (!server.ok()) return out;
  auto chat = [&](const json& messages, int max_tokens) {
    json body = {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0},
                 {"chat_template_kwargs", {{"enable_thinking", false}}}};
    auto res = server.client().Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res ? json::parse(res->body) : json{};
  };
  json messages = {{{"role", "system"}, {"content", "Be brief. " + std::string(200, 'q')}},
                   {{"role", "user"}, {"content", "Tell me about caches."}}};
  const EngineStats before = server.loop().stats();
  json r = chat(messages, 40);
  const EngineStats after = server.loop().stats();
  out.shadow_tokens = after.shadow_tokens - before.shadow_tokens;
  out.with_decode = after.shadow_tokens_with_decode - before.shadow_tokens_with_decode;
  out.kept = after.shadows_kept - before.shadows_kept;
  out.renders = after.shadow_renders - before.shadow_renders;
  messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
  const size_t carried = messages.size();
  messages.push_back({{"role", "user"}, {"content", "Why?"}});
  json f = chat(messages, 4);
  out.follow_up_prefilled =
      f["usage"]["prompt_tokens"].get<int>() - f["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  // The follow-up's own tokens: its prompt less the previous turn rendered as it now is.
  const auto& tmpl = server.chat_template();
  auto tokens = [&](size_t n, bool generation_prompt) {
    std::vector<engine::ChatMessage> ms;
    for (size_t i = 0; i < n; ++i) ms.push_back({.role = messages[i]["role"], .content = messages[i]["content"]});
    engine::RenderOptions o;
    o.enable_thinking = false;
    o.add_generation_prompt = generation_prompt;
    auto rendered = tmpl.Render(ms, o);
    EXPECT_TRUE(rendered.ok());
    return rendered.ok() ? static_cast<int>(server.model().Tokenize(rendered->prompt, false, true).size()) : 0;
  };
  out.follow_up_new = tokens(messages.size(), true) - tokens(carried, false);
  return out;
}

TEST(ShadowFeedTest, AfterReplyFeedsNothingBesideTheDecodeAndStillPreparesTheNextTurn) {
  const Turn t = RunTurn(ShadowFeed::kAfterReply);
  EXPECT_EQ(t.with_decode, 0);
  // A target per phase, then one every 16 tokens: not one per word.
  EXPECT_LE(t.renders, 2 + 40 / 16) << "renders";
  EXPECT_GT(t.shadow_tokens, 16) << "the re-rendered reply goes in when it ends";
  EXPECT_EQ(t.kept, 1);
  EXPECT_LE(t.follow_up_prefilled, t.follow_up_new + 8) << "new " << t.follow_up_new;
}

TEST(ShadowFeedTest, WithDecodeFeedsTheShadowBesideTheDecode) {
  const Turn t = RunTurn(ShadowFeed::kWithDecode);
  EXPECT_GE(t.with_decode, 16);
  EXPECT_GT(t.renders, 2 + 40 / 16) << "a fresh target whenever more of the reply is stable";
  EXPECT_GT(t.with_decode, t.shadow_tokens - t.with_decode) << "most of it beside the decode, the rest at the end";
  EXPECT_EQ(t.kept, 1);
  EXPECT_LE(t.follow_up_prefilled, t.follow_up_new + 8) << "new " << t.follow_up_new;
}

// --shadow-prefill paced: while nothing is known of the client, a tool loop's re-rendered
// form goes beside the reply's decode in tiles (after-reply); once the conversation's
// user turns have come after pauses that hold its prefill, the replies decode alone and
// warm-ahead prepares the loop in the pause, so the user turn still prefills only itself.
TEST(ShadowFeedTest, PacedFeedsAToolLoopBesideTheDecodeOnlyUntilItsClientIsSeenToPause) {
  EngineConfig ec = OneSlotConfig();
  ec.shadow_feed = ShadowFeed::kPaced;
  ec.shadow_wait_ms = 5000;
  HttpConfig hc;
  hc.model_alias = "tiny";
  TestServer server(ec, hc);
  ASSERT_TRUE(server.ok());
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "read_file"},
                                     {"description", "Reads a file"},
                                     {"parameters", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}}}}}});
  json messages = {{{"role", "system"}, {"content", "You are a coding agent. " + std::string(200, 'a')}},
                   {{"role", "user"}, {"content", "Find the bug in the parser."}}};
  int n_calls = 0;
  json last;
  // The user turn (already in `messages`) and `calls` tool turns, each reply replaced by
  // the client's scripted call and its result, then the model's answer. Returns the
  // shadow tokens fed beside the decode meanwhile.
  auto loop = [&](int calls) {
    const int64_t before = server.loop().stats().shadow_tokens_with_decode;
    for (int k = 0; k <= calls; ++k) {
      json body = {{"messages", messages}, {"tools", tools}, {"max_tokens", 40}, {"temperature", 0},
                   {"chat_template_kwargs", {{"enable_thinking", false}}}};
      auto res = server.client().Post("/v1/chat/completions", body.dump(), "application/json");
      EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
      last = res ? json::parse(res->body) : json{};
      if (k == calls) break;
      const std::string id = "call_" + std::to_string(n_calls++);
      json call = {{"id", id}, {"type", "function"},
                   {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"src/" + id + ".cc\"}"}}}};
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
      std::string result;
      for (int line = 0; line < 10; ++line) result += "int " + id + "_" + std::to_string(line) + "(int x) { return x; }\n";
      messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    }
    messages.push_back({{"role", "assistant"}, {"content", last["choices"][0]["message"]["content"]}});
    return server.loop().stats().shadow_tokens_with_decode - before;
  };
  // A person reading the answer, then asking more. Returns the user turn's prompt tokens
  // computed.
  auto user_turn_after_a_pause = [&](const std::string& text) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    messages.push_back({{"role", "user"}, {"content", text}});
  };
  auto prefilled = [&] {
    return last["usage"]["prompt_tokens"].get<int>() - last["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };

  EXPECT_GT(loop(3), 0) << "no pause seen yet: the loop goes beside the decode";
  user_turn_after_a_pause("And the lexer?");
  loop(1);
  user_turn_after_a_pause("And the printer?");  // the second pause seen: enough to go by
  const int64_t stats_before = server.loop().stats().shadow_tokens;
  EXPECT_EQ(loop(3), 0) << "the replies decode alone";
  EXPECT_GT(server.loop().stats().shadow_tokens, stats_before) << "their shadows are still fed when they end";
  user_turn_after_a_pause("Thanks.");
  loop(0);
  EXPECT_LE(prefilled(), 24) << "warm-ahead prepared the loop in the pause; prompt " << last["usage"]["prompt_tokens"];
}

}  // namespace
}  // namespace hearth::server
