// ChatTemplate::Render's one-pass path against llama.cpp's full render, on every chat
// template llama.cpp ships.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

ChatTool Tool(std::string name, std::string parameters) {
  return {.name = std::move(name), .description = "A tool for tests.", .parameters = std::move(parameters)};
}

// Conversations unlike the probes OnePassRender checks itself with: longer, with parallel
// calls, merged system messages, empty and non-ASCII content, reasoning in the last turn.
struct Case {
  std::string name;
  std::vector<ChatMessage> messages;
  RenderOptions options;
};

std::vector<Case> Cases() {
  const ChatToolCall read{.id = "call_a", .name = "read_file", .arguments = R"({"path":"src/main.cc"})"};
  const ChatToolCall grep{.id = "call_b", .name = "grep", .arguments = R"({"pattern":"TODO","limit":5})"};
  std::vector<ChatMessage> agent = {
      {.role = "system", .content = "You are a coding agent.\nWork in /repo."},
      {.role = "user", .content = "Find the TODOs and fix the first one."},
      {.role = "assistant", .content = "", .reasoning_content = "Search first.", .tool_calls = {grep}},
      {.role = "tool", .content = "src/main.cc:12: TODO tidy", .tool_call_id = "call_b", .tool_name = "grep"},
      {.role = "assistant", .content = "Reading it.", .tool_calls = {read}},
      {.role = "tool", .content = "int main() {}\n", .tool_call_id = "call_a", .tool_name = "read_file"},
      {.role = "assistant", .content = "Done: tidied main.", .reasoning_content = "Small fix."},
      {.role = "user", .content = "Now both at once."},
      {.role = "assistant", .tool_calls = {read, grep}},
      {.role = "tool", .content = "int main() {}", .tool_call_id = "call_a", .tool_name = "read_file"},
      {.role = "tool", .content = "(none)", .tool_call_id = "call_b", .tool_name = "grep"},
  };
  std::vector<ChatMessage> chat = {
      {.role = "system", .content = "Réponds en français. 日本語も可。"},
      {.role = "user", .content = "Bonjour"},
      {.role = "assistant", .content = "Bonjour !", .reasoning_content = "Salutation."},
      {.role = "user", .content = ""},
      {.role = "assistant", .content = "Vous n'avez rien écrit."},
      {.role = "user", .content = "Pardon. 2 + 2 ?"},
  };
  // Gemma 4's handler gives another generation prompt after a reply that said something
  // before its calls.
  std::vector<ChatMessage> said_then_called = {
      {.role = "user", .content = "Read a."},
      {.role = "assistant", .content = "Reading it.", .tool_calls = {read}},
      {.role = "tool", .content = "contents of a", .tool_call_id = "call_a", .tool_name = "read_file"},
  };
  std::vector<ChatMessage> last_reply = chat;
  last_reply.push_back({.role = "assistant", .content = "4", .reasoning_content = "Arithmetic."});

  RenderOptions tools;
  tools.tools = {Tool("read_file", R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"),
                 Tool("grep", R"({"type":"object","properties":{"pattern":{"type":"string"},)"
                              R"("limit":{"type":"integer"}},"required":["pattern"]})")};
  RenderOptions parallel = tools;
  parallel.parallel_tool_calls = true;
  parallel.tool_choice = "required";
  RenderOptions plain;
  RenderOptions no_thinking;
  no_thinking.enable_thinking = false;
  no_thinking.reasoning_format = "none";
  no_thinking.template_kwargs = {{"custom_flag", "true"}};
  RenderOptions continuing;
  continuing.add_generation_prompt = false;

  std::vector<ChatMessage> agent_turn = agent;
  agent_turn.push_back({.role = "assistant", .content = "Both fine."});
  agent_turn.push_back({.role = "user", .content = "Thanks."});
  std::vector<ChatMessage> no_system(chat.begin() + 1, chat.end());
  std::vector<ChatMessage> developer = chat;
  developer.front().role = "developer";

  return {
      {"agent_after_tools", agent, tools},
      {"agent_parallel_required", agent, parallel},
      {"agent_next_user_turn", agent_turn, tools},
      {"agent_tool_choice_none", agent_turn, [&] {
         RenderOptions o = tools;
         o.tool_choice = "none";
         return o;
       }()},
      {"said_then_called", said_then_called, tools},
      {"said_then_called_no_thinking", said_then_called, no_thinking},
      {"chat", chat, plain},
      {"chat_no_thinking_kwargs", chat, no_thinking},
      {"chat_developer", developer, plain},
      {"chat_no_system", no_system, plain},
      {"chat_with_tools", chat, tools},
      {"last_reply_no_generation_prompt", last_reply, continuing},
      {"single_user", {{.role = "user", .content = "hi"}}, plain},
  };
}

std::string Describe(const RenderedPrompt& r) {
  return "prompt:\n" + r.prompt + "\ngeneration prompt: " + r.generation_prompt;
}

// One test per template, so that ctest spreads them over the cores.
class OnePassRenderTest : public ::testing::TestWithParam<std::string> {};

// Render (one pass where it can) equals RenderInFull field for field and token for token.
TEST_P(OnePassRenderTest, EqualsTheFullRender) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto tmpl = ChatTemplate::Create(*model, testing::ReadShippedTemplate(GetParam()));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  std::cout << GetParam() << ((*tmpl)->renders_in_one_pass() ? " renders in one pass\n" : " renders in full\n");
  int n_compared = 0;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto once = (*tmpl)->Render(c.messages, c.options);
    auto full = (*tmpl)->RenderInFull(c.messages, c.options);
    ASSERT_EQ(once.ok(), full.ok()) << (once.ok() ? full : once).status().ToString();
    if (!full.ok()) {
      EXPECT_EQ(once.status().message(), full.status().message());
      continue;
    }
    ++n_compared;
    EXPECT_EQ(once->prompt, full->prompt);
    EXPECT_EQ(model->Tokenize(once->prompt, true, true), model->Tokenize(full->prompt, true, true));
    EXPECT_EQ(once->generation_prompt, full->generation_prompt) << Describe(*full);
    EXPECT_EQ(once->additional_stops, full->additional_stops);
    EXPECT_EQ(once->supports_thinking, full->supports_thinking);
    EXPECT_EQ(once->output_format.format, full->output_format.format);
    EXPECT_EQ(once->output_format.parser, full->output_format.parser);
    EXPECT_EQ(once->output_format.generation_prompt, full->output_format.generation_prompt);
    EXPECT_EQ(once->output_format.reasoning_format, full->output_format.reasoning_format);
  }
  EXPECT_GE(n_compared, 1) << "no conversation renders on this template";
}

INSTANTIATE_TEST_SUITE_P(Families, OnePassRenderTest, ::testing::ValuesIn(testing::FamilyTemplateNames()),
                         [](const auto& p) { return testing::TestParamName(p.param); });
INSTANTIATE_TEST_SUITE_P(Shipped, OnePassRenderTest, ::testing::ValuesIn(testing::OtherShippedTemplateNames()),
                         [](const auto& p) { return testing::TestParamName(p.param); });

// llama.cpp ships some 70 templates; the families hearth builds models for take the one-pass
// path, gpt-oss (whose handler edits the messages) does not.
TEST(OnePassRenderFamiliesTest, TheModelFamiliesRenderInOnePass) {
  EXPECT_GE(testing::ShippedTemplateNames().size(), 40u);
  // The sweeps above split the templates in two; the split loses none and names no
  // template that is not shipped.
  EXPECT_EQ(testing::FamilyTemplateNames().size() + testing::OtherShippedTemplateNames().size(),
            testing::ShippedTemplateNames().size());
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  for (const char* family :
       {"Qwen3.5-4B", "Qwen-Qwen3-0.6B", "google-gemma-4-31B-it", "ibm-granite-granite-4.0"}) {
    auto tmpl = ChatTemplate::Create(*model, testing::ReadShippedTemplate(family));
    ASSERT_TRUE(tmpl.ok()) << family << ": " << tmpl.status().ToString();
    EXPECT_TRUE((*tmpl)->renders_in_one_pass()) << family << " renders in full";
  }
  auto gpt_oss = ChatTemplate::Create(*model, testing::ReadShippedTemplate("openai-gpt-oss-120b"));
  ASSERT_TRUE(gpt_oss.ok()) << gpt_oss.status().ToString();
  EXPECT_FALSE((*gpt_oss)->renders_in_one_pass()) << "gpt-oss's handler edits the messages";
}

}  // namespace
}  // namespace hearth::engine
