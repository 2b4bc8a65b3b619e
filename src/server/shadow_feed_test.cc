// Where shadow tokens go (EngineConfig::shadow_feed): beside the reply's decode steps, or
// only when the reply ends. Either way the next turn, sent at once, finds its re-rendered
// form of the reply in the cache.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace
}  // namespace hearth::server
