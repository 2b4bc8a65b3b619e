// The failure modes of the cache issue, end to end through HTTP on the tiny hybrid model
// with the real Qwen3.5 template: each must be impossible (or reported) by design.
//   template trap, interrupt path, prompt instability, checkpoint poison.
// Target on follow-up turns: prefilled <= 1.02 * new + 8, where new counts the added
// messages and their template glue.
#include <gtest/gtest.h>

#include <cctype>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/chat_template.h"
#include "server/engine_loop.h"
#include "server/http_server.h"
#include "server/test_server.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;

class FailureModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig ec;
    ec.context.n_ctx = 8192;
    ec.context.n_batch = 256;
    ec.context.n_ubatch = 256;
    ec.context.n_threads = 1;
    ec.n_parallel = 2;
    ec.context.n_seq_max = 4;
    ec.shadow_wait_ms = 5000;  // every shadow render lands before the next token: deterministic
    HttpConfig hc;
    hc.model_alias = "tiny";
    server_ = std::make_unique<TestServer>(ec, hc);
    ASSERT_TRUE(server_->ok());
    model_ = &server_->model();
    tmpl_ = &server_->chat_template();
    loop_ = &server_->loop();
    client_ = &server_->client();
  }
  void TearDown() override { server_.reset(); }

  json Chat(const json& messages, bool think, int max_tokens = 24, const std::string& salt = "",
            const json& tools = nullptr) {
    json body = {{"messages", messages},
                 {"max_tokens", max_tokens},
                 {"temperature", 0},
                 {"chat_template_kwargs", {{"enable_thinking", think}}}};
    if (!salt.empty()) body["cache_salt"] = salt;
    if (!tools.is_null()) body["tools"] = tools;
    auto res = client_->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res ? json::parse(res->body) : json{};
  }

  // Waits until the engine is idle and warm-ahead has caught up. The deadline only
  // guards against a hang: a loaded machine may take long.
  void Settle(int64_t warm_tasks) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = loop_->stats();
      if (s.background_tasks >= warm_tasks && s.slots_busy == 0 && s.queued == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "warm-ahead did not finish within 120 s";
  }

  // The prompt the server builds for `messages`.
  std::vector<engine::Token> PromptTokens(const json& messages, bool think) {
    std::vector<engine::ChatMessage> ms;
    for (const auto& m : messages) ms.push_back({.role = m["role"], .content = m["content"]});
    engine::RenderOptions o;
    o.enable_thinking = think;
    auto r = tmpl_->Render(ms, o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? model_->Tokenize(r->prompt, false, true) : std::vector<engine::Token>{};
  }

  // Tokens new in `messages` (whose first `carried` messages were in the previous
  // request or are its reply): the added messages and their template glue.
  int NewTokens(const json& messages, size_t carried, bool think) {
    auto to_engine = [](const json& ms, size_t n) {
      std::vector<engine::ChatMessage> out;
      for (size_t i = 0; i < n; ++i) out.push_back({.role = ms[i]["role"], .content = ms[i]["content"]});
      return out;
    };
    engine::RenderOptions all;
    all.enable_thinking = think;
    engine::RenderOptions prefix = all;
    prefix.add_generation_prompt = false;
    auto a = tmpl_->Render(to_engine(messages, messages.size()), all);
    auto b = tmpl_->Render(to_engine(messages, carried), prefix);
    EXPECT_TRUE(a.ok() && b.ok());
    return static_cast<int>(model_->Tokenize(a->prompt, false, true).size()) -
           static_cast<int>(model_->Tokenize(b->prompt, false, true).size());
  }

  std::unique_ptr<TestServer> server_;
  const engine::Model* model_ = nullptr;
  const engine::ChatTemplate* tmpl_ = nullptr;
  EngineLoop* loop_ = nullptr;
  httplib::Client* client_ = nullptr;
};

// The template re-renders the previous reply differently from what was generated (no
// think scaffold, no reasoning); warm-ahead prepares that rendering before the next turn.
TEST_F(FailureModesTest, TemplateTrapFollowUpsPrefillOnlyNewTokens) {
  for (bool think : {true, false}) {
    json messages = {{{"role", "system"}, {"content", std::string(think ? "T" : "F") + " You are terse. " + std::string(400, 'x')}},
                     {{"role", "user"}, {"content", "Explain prefix caching."}}};
    int64_t warm = loop_->stats().background_tasks;
    for (int turn = 0; turn < 5; ++turn) {
      json r = Chat(messages, think);
      const auto& usage = r["usage"];
      const int prompt = usage["prompt_tokens"], cached = usage["prompt_tokens_details"]["cached_tokens"];
      if (turn > 0) {
        const int fresh = NewTokens(messages, messages.size() - 1, think);
        EXPECT_LE(prompt - cached, 1.02 * fresh + 8) << "think=" << think << " turn " << turn << " new=" << fresh
                                                     << " usage=" << usage.dump();
      }
      messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "And then what happens in turn " + std::to_string(turn) + "?"}});
      Settle(++warm);
    }
  }
}

// A client that answers at once (an agent returning tool results, a scripted client)
// leaves warm-ahead no idle time: the shadow prefilled the re-rendered reply while it was
// generated, so the follow-up still prefills only its new tokens, and what it computes
// equals a cold run (over the greedy steps with a clear winner).
TEST_F(FailureModesTest, FollowUpsWithoutIdleTimePrefillOnlyNewTokens) {
  for (bool think : {false, true}) {
    json messages = {{{"role", "system"}, {"content", std::string(think ? "T" : "F") + " Be brief. " + std::string(200, 'z')}},
                     {{"role", "user"}, {"content", "Tell me about caches."}}};
    const int64_t kept_before = loop_->stats().shadows_kept;
    int exact_turns = 0;
    constexpr int kTurns = 4;
    for (int turn = 0; turn < kTurns; ++turn) {
      const bool last = turn + 1 == kTurns;
      // Warm and cold are compared over the greedy steps with a clear winner: the last
      // question is asked in the first of a few wordings that has one.
      int clear = 0;
      for (int wording = 0; last && clear == 0 && wording < 8; ++wording) {
        messages.back()["content"] = "Why, in turn " + std::to_string(turn - 1) + "?" + std::string(wording, '?');
        clear = testing::ClearGreedySteps(*model_, PromptTokens(messages, think), 16);
      }
      ASSERT_TRUE(!last || clear > 0) << "think=" << think << ": no wording of the last question has a clear greedy step";
      json r = Chat(messages, think, last ? std::max(clear, 1) : 40);
      const auto& usage = r["usage"];
      const int prompt = usage["prompt_tokens"], cached = usage["prompt_tokens_details"]["cached_tokens"];
      if (turn > 0) {
        const int fresh = NewTokens(messages, messages.size() - 1, think);
        EXPECT_LE(prompt - cached, 1.02 * fresh + 8)
            << "think=" << think << " turn " << turn << " new=" << fresh << " usage=" << usage.dump();
        // The reply's last word (which more text could still have joined) and the end of
        // its turn were fed when it ended (FinalShadowTokens), so only the new message's
        // own tokens are left; unless the template reworks the reply's end (trailing
        // whitespace, markup), or thinking left no content to continue.
        const std::string reply = messages[messages.size() - 2]["content"];
        if (!think && !reply.empty() && std::isspace(static_cast<unsigned char>(reply.back())) == 0 &&
            reply.find('<') == std::string::npos) {
          json other = messages;
          other.back()["content"] = "Something else entirely";
          const auto mine = PromptTokens(messages, think);
          const int own = static_cast<int>(mine.size() - engine::CommonPrefix(mine, PromptTokens(other, think)));
          EXPECT_LE(prompt - cached, own) << "turn " << turn << " usage=" << usage.dump();
          ++exact_turns;
        }
      }
      if (last) {
        // The same request in a namespace of its own: computed from scratch.
        json cold = Chat(messages, think, clear, "cold-" + std::to_string(think));
        EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        EXPECT_EQ(cold["choices"][0]["message"], r["choices"][0]["message"]) << "think=" << think;
      }
      messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "Why, in turn " + std::to_string(turn) + "?"}});
    }
    // (With thinking on, the random model rarely leaves its reasoning, so there is often
    // no content to shadow: the re-rendered reply is then only its closing tokens.)
    if (!think) {
      EXPECT_GE(loop_->stats().shadows_kept - kept_before, kTurns - 1);
      EXPECT_GE(exact_turns, 2);
    }
  }
}

// An agent's tool loop: the client replaces each reply with its own tool call and the
// result. Each turn's shadow renders the loop as it will be once a user message follows
// (Qwen3.5 then renders the loop's assistant turns without their think scaffold), so
// without states at its message ends every turn's shadow would feed the whole loop again.
// With them, a turn's shadow starts from the previous one's and feeds only what is new.
TEST_F(FailureModesTest, EachToolTurnsShadowFeedsOnlyWhatIsNew) {
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "read_file"},
                                     {"description", "Reads a file"},
                                     {"parameters",
                                      {{"type", "object"},
                                       {"properties", {{"path", {{"type", "string"}}}}},
                                       {"required", json::array({"path"})}}}}}}});
  json messages = {{{"role", "system"}, {"content", "You are a coding agent. " + std::string(200, 'a')}},
                   {{"role", "user"}, {"content", "Find the bug in the parser."}}};
  int previous_prompt = 0;
  for (int turn = 0; turn < 5; ++turn) {
    const int64_t fed_before = loop_->stats().shadow_tokens;
    json r = Chat(messages, false, 40, "", tools);
    const int prompt = r["usage"]["prompt_tokens"];
    const int generated = r["usage"]["completion_tokens"];
    const int64_t fed = loop_->stats().shadow_tokens - fed_before;
    if (turn >= 2) {
      // What is new since the last turn (a call and its result), the reply and its
      // closing, and two chunks' worth of slack (a reply whose form changes restarts at
      // the last message end): not the loop again.
      EXPECT_LE(fed, prompt - previous_prompt + generated + 64) << "turn " << turn << " prompt " << prompt;
    }
    previous_prompt = prompt;
    const std::string id = "call_" + std::to_string(turn);
    json call = {{"id", id},
                 {"type", "function"},
                 {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"src/parser_" + std::to_string(turn) + ".cc\"}"}}}};
    messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
    std::string result = "// parser part " + std::to_string(turn) + "\n";
    for (int line = 0; line < 12; ++line) result += "int f" + std::to_string(line) + "(int x) { return x + " + std::to_string(turn) + "; }\n";
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
  }
}

// A reply cut off mid-stream is kept: the client sends back what it read, after a pause
// (warm-ahead prepares the next request) or at once (the shadow holds it).
TEST_F(FailureModesTest, InterruptedReplyIsKept) {
  int64_t cancelled_before = loop_->stats().requests_cancelled;
  for (bool idle : {true, false}) {
    json messages = {
        {{"role", "system"}, {"content", std::string(idle ? "I" : "N") + " Be helpful. " + std::string(300, 'y')}},
        {{"role", "user"}, {"content", "Write a long story."}}};
    int64_t warm = loop_->stats().background_tasks;
    for (int turn = 0; turn < 3; ++turn) {
      json body = {{"messages", messages},
                   {"max_tokens", 200},
                   {"temperature", 0},
                   {"stream", true},
                   {"chat_template_kwargs", {{"enable_thinking", false}}}};
      std::string received, buffer;
      int chunks = 0;
      auto res = client_->Post("/v1/chat/completions", httplib::Headers{}, body.dump(), "application/json",
                               [&](const char* data, size_t n) {
                                 buffer.append(data, n);
                                 size_t at;
                                 while ((at = buffer.find("\n\n")) != std::string::npos) {
                                   std::string event = buffer.substr(0, at);
                                   buffer.erase(0, at + 2);
                                   if (!event.starts_with("data: ") || event == "data: [DONE]") continue;
                                   json j = json::parse(event.substr(6));
                                   if (j["choices"].empty()) continue;
                                   const auto& d = j["choices"][0]["delta"];
                                   if (d.contains("content") && d["content"].is_string())
                                     received += d["content"].get<std::string>();
                                   ++chunks;
                                 }
                                 // The user hits stop, having seen what arrived.
                                 return chunks < 12;
                               });
      EXPECT_GE(chunks, 12);
      if (idle) {
        Settle(++warm);
      } else {
        // At once, but after the server noticed the cut: until then the cut request runs
        // on and holds what it computed (a race no cache can win; the server notices at
        // its next write, later on a loaded machine).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (loop_->stats().requests_cancelled < cancelled_before + 1 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_GE(loop_->stats().requests_cancelled, cancelled_before + 1) << "the cut was not noticed within 60 s";
      }
      ++cancelled_before;
      messages.push_back({{"role", "assistant"}, {"content", received}});
      messages.push_back({{"role", "user"}, {"content", "Go on, turn " + std::to_string(turn)}});
      json r = Chat(messages, false, 8);
      const auto& usage = r["usage"];
      const int prefilled =
          usage["prompt_tokens"].get<int>() - usage["prompt_tokens_details"]["cached_tokens"].get<int>();
      const int fresh = NewTokens(messages, messages.size() - 1, false);
      EXPECT_LE(prefilled, 1.02 * fresh + 8) << "idle=" << idle << " turn " << turn << " usage=" << usage.dump();
      messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "More."}});
      Settle(++warm);
      if (!idle) warm = loop_->stats().background_tasks;  // the cut reply's warm-ahead may have been preempted
    }
  }
  EXPECT_GE(loop_->stats().requests_cancelled, 6);
}

// Per-request content early in the prompt is found and named, in this request's own
// terms only: the earlier prompt it rejoined may be another client's (without --api-key
// all share one namespace), so none of that prompt's text may come back.
TEST_F(FailureModesTest, VolatileSpanIsReportedWithoutTheEarlierPromptsText) {
  auto messages_with = [&](const std::string& id) {
    return json{{{"role", "system"}, {"content", "Request " + id + ". You are a careful assistant who explains things."}},
                {{"role", "user"}, {"content", "What is a radix tree and why do servers use one?"}}};
  };
  Chat(messages_with("3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f"), false, 4);
  json r = Chat(messages_with("0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"), false, 4);
  const auto& report = r["usage"]["hearth_cache"];
  ASSERT_TRUE(report.contains("volatile_span")) << report.dump();
  const auto& span = report["volatile_span"];
  EXPECT_EQ(span["message"], 0);
  EXPECT_NE(span["text"].get<std::string>().find("0a1b2c3d"), std::string::npos) << report.dump();
  EXPECT_FALSE(span.contains("previous_text")) << report.dump();
  EXPECT_EQ(r.dump().find("3f2b8c1e"), std::string::npos) << "the earlier prompt's text leaked: " << r.dump();
  // The positions are this prompt's: the span's tokens detokenize to its text.
  const auto prompt = PromptTokens(messages_with("0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"), false);
  const int start = span["start"], end = span["end"];
  ASSERT_TRUE(0 < start && start < end && end <= static_cast<int>(prompt.size())) << span.dump();
  EXPECT_EQ(model_->Detokenize(std::span(prompt).subspan(static_cast<size_t>(start), static_cast<size_t>(end - start)), true),
            span["text"].get<std::string>());
  EXPECT_GE(loop_->stats().volatile_spans, 1);
}

// Checkpoint poison: no state is ever stored where no prompt can arrive. A long
// generation adds no snapshots inside the generated text.
TEST_F(FailureModesTest, LongGenerationsStoreNoUnreachableStates) {
  json messages = {{{"role", "user"}, {"content", "Count to a thousand."}}};
  Chat(messages, false, 300);
  Settle(loop_->stats().background_tasks);
  const json cache = json::parse(loop_->DescribeCache());
  // One request: snapshots at its message boundaries and generation start (at most 4
  // here), its device sequence, and what warm-ahead stored for the next turn.
  EXPECT_LE(cache["states"].get<int>(), 8) << cache.dump();
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

// /apply-template renders history only when asked: what benchmarks count new tokens with.
TEST_F(FailureModesTest, ApplyTemplateHonorsAddGenerationPrompt) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto with = client_->Post("/apply-template", body.dump(), "application/json");
  body["add_generation_prompt"] = false;
  auto without = client_->Post("/apply-template", body.dump(), "application/json");
  ASSERT_TRUE(with && without && with->status == 200 && without->status == 200);
  const std::string a = json::parse(with->body)["prompt"], b = json::parse(without->body)["prompt"];
  EXPECT_TRUE(a.starts_with(b));
  EXPECT_TRUE(a.ends_with("<|im_start|>assistant\n<think>\n")) << a;
  EXPECT_TRUE(b.ends_with("hi<|im_end|>\n")) << b;
  EXPECT_LT(json::parse(without->body)["n_tokens"].get<int>(), json::parse(with->body)["n_tokens"].get<int>());
}

}  // namespace
}  // namespace hearth::server
