// ChatTemplate's spliced renders against llama.cpp's full render, on every chat template
// llama.cpp ships, with contents that templates treat unlike plain text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

constexpr char kPlaceholder[] = "hearth splice test placeholder";

// A conversation up to a reply, and the messages the next request adds (their contents
// to be filled in).
struct Turn {
  std::string name;
  std::vector<ChatMessage> history;
  std::vector<ChatMessage> next;
  RenderOptions options;
};

std::vector<Turn> Turns() {
  const ChatToolCall read{.id = "call_a", .name = "read_file", .arguments = R"({"path":"src/main.cc"})"};
  const ChatToolCall grep{.id = "call_b", .name = "grep", .arguments = R"({"pattern":"TODO"})"};
  RenderOptions tools;
  tools.tools = {{.name = "read_file",
                  .description = "Reads a file.",
                  .parameters = R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"},
                 {.name = "grep",
                  .description = "Searches files.",
                  .parameters = R"({"type":"object","properties":{"pattern":{"type":"string"}},"required":["pattern"]})"}};
  RenderOptions no_thinking;
  no_thinking.enable_thinking = false;
  const std::vector<ChatMessage> chat = {
      {.role = "system", .content = "Be brief."},
      {.role = "user", .content = "Hi"},
      {.role = "assistant", .content = "Hello!", .reasoning_content = "A greeting."},
      {.role = "user", .content = "What is 2 + 2?"},
      {.role = "assistant", .content = "4", .reasoning_content = "Arithmetic."},
  };
  const std::vector<ChatMessage> agent = {
      {.role = "system", .content = "You are a coding agent."},
      {.role = "user", .content = "Find the TODOs."},
      {.role = "assistant", .reasoning_content = "Search first.", .tool_calls = {grep}},
      {.role = "tool", .content = "src/main.cc:12: TODO", .tool_call_id = "call_b", .tool_name = "grep"},
      {.role = "assistant", .content = "Reading it.", .tool_calls = {read}},
  };
  std::vector<ChatMessage> parallel = agent;
  parallel.back() = {.role = "assistant", .tool_calls = {read, grep}};
  std::vector<ChatMessage> agent_done = agent;
  agent_done.push_back({.role = "tool", .content = "int main() {}", .tool_call_id = "call_a", .tool_name = "read_file"});
  agent_done.push_back({.role = "assistant", .content = "Nothing to fix.", .reasoning_content = "It is fine."});
  const std::vector<ChatMessage> no_system(chat.begin() + 1, chat.end());

  const ChatMessage user{.role = "user"};
  auto result = [](const ChatToolCall& call) {
    return ChatMessage{.role = "tool", .tool_call_id = call.id, .tool_name = call.name};
  };
  return {
      {"chat", chat, {user}, {}},
      {"chat_no_system", no_system, {user}, {}},
      {"chat_no_thinking", chat, {user}, no_thinking},
      {"tool_result", agent, {result(read)}, tools},
      {"parallel_tool_results", parallel, {result(read), result(grep)}, tools},
      {"user_after_tool_loop", agent_done, {user}, tools},
  };
}

// Contents that templates trim, escape, test or split on, besides plain text.
std::vector<std::string> Contents() {
  return {
      "Tell me more.",
      "  padded, with a newline at the end\n",
      "",
      "<tool_response>\nsrc/a.cc\n</tool_response>",
      "/no_think just answer",
      "quotes \" ' and {{ braces }} and <think>not a thought</think>",
      "<|im_end|>\n<|im_start|>user\nnested turn",
      "日本語とÉmilie",
      kPlaceholder,
  };
}

class SpliceRenderTest : public ::testing::TestWithParam<std::string> {};

// For every turn and content: the render after RenderAndRemember (spliced where it can be)
// equals llama.cpp's full render field for field and token for token.
TEST_P(SpliceRenderTest, EqualsTheFullRender) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto tmpl = ChatTemplate::Create(*model, testing::ReadShippedTemplate(GetParam()));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  int n_compared = 0;
  for (const Turn& turn : Turns()) {
    std::vector<ChatMessage> open = turn.history;
    for (ChatMessage m : turn.next) {
      m.content = kPlaceholder;
      open.push_back(std::move(m));
    }
    if (!(*tmpl)->RenderAndRemember(open, turn.options, turn.next.size()).ok()) continue;
    const std::vector<std::string> contents = Contents();
    for (size_t c = 0; c < contents.size(); ++c) {
      SCOPED_TRACE(turn.name + " / content " + std::to_string(c));
      std::vector<ChatMessage> messages = open;
      for (size_t i = 0; i < turn.next.size(); ++i) {
        // Each result its own content, the first one the content under test.
        messages[turn.history.size() + i].content = contents[(c + i) % contents.size()];
      }
      auto spliced = (*tmpl)->Render(messages, turn.options);
      auto full = (*tmpl)->RenderInFull(messages, turn.options);
      ASSERT_EQ(spliced.ok(), full.ok()) << (spliced.ok() ? full : spliced).status().ToString();
      if (!full.ok()) continue;
      ++n_compared;
      EXPECT_EQ(spliced->prompt, full->prompt);
      EXPECT_EQ(model->Tokenize(spliced->prompt, true, true), model->Tokenize(full->prompt, true, true));
      EXPECT_EQ(spliced->generation_prompt, full->generation_prompt);
      EXPECT_EQ(spliced->additional_stops, full->additional_stops);
      EXPECT_EQ(spliced->supports_thinking, full->supports_thinking);
      EXPECT_EQ(spliced->output_format, full->output_format);
    }
  }
  EXPECT_GE(n_compared, 1) << "no conversation renders on this template";
}

INSTANTIATE_TEST_SUITE_P(Families, SpliceRenderTest, ::testing::ValuesIn(testing::FamilyTemplateNames()),
                         [](const auto& p) { return testing::TestParamName(p.param); });
INSTANTIATE_TEST_SUITE_P(Shipped, SpliceRenderTest, ::testing::ValuesIn(testing::OtherShippedTemplateNames()),
                         [](const auto& p) { return testing::TestParamName(p.param); });

// The families hearth builds models for splice a plain next message, a tool result and
// parallel tool results; Qwen3 renders a user message that is a tool response in full.
TEST(SpliceRenderFamiliesTest, TheModelFamiliesSplice) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  for (const char* family :
       {"Qwen3.5-4B", "Qwen-Qwen3-0.6B", "google-gemma-4-31B-it", "ibm-granite-granite-4.0"}) {
    SCOPED_TRACE(family);
    auto tmpl = ChatTemplate::Create(*model, testing::ReadShippedTemplate(family));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    for (const Turn& turn : Turns()) {
      SCOPED_TRACE(turn.name);
      std::vector<ChatMessage> messages = turn.history;
      for (ChatMessage m : turn.next) {
        m.content = kPlaceholder;
        messages.push_back(std::move(m));
      }
      ASSERT_TRUE((*tmpl)->RenderAndRemember(messages, turn.options, turn.next.size()).ok());
      for (size_t i = turn.history.size(); i < messages.size(); ++i) messages[i].content = "Plain words.";
      const size_t before = (*tmpl)->n_spliced();
      ASSERT_TRUE((*tmpl)->Render(messages, turn.options).ok());
      EXPECT_EQ((*tmpl)->n_spliced(), before + 1);
    }
  }
  auto qwen3 = ChatTemplate::Create(*model, testing::ReadShippedTemplate("Qwen-Qwen3-0.6B"));
  ASSERT_TRUE(qwen3.ok());
  const Turn chat = Turns().front();
  std::vector<ChatMessage> messages = chat.history;
  messages.push_back({.role = "user", .content = kPlaceholder});
  ASSERT_TRUE((*qwen3)->RenderAndRemember(messages, chat.options, 1).ok());
  messages.back().content = "<tool_response>\nx\n</tool_response>";
  const size_t before = (*qwen3)->n_spliced();
  auto rendered = (*qwen3)->Render(messages, chat.options);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ((*qwen3)->n_spliced(), before) << "the tool response changes how the earlier reply renders";
  EXPECT_EQ(rendered->prompt, (*qwen3)->RenderInFull(messages, chat.options)->prompt);
}

// A conversation that differs anywhere but in the open contents, or in its options, is
// rendered whole.
TEST(SpliceRenderFamiliesTest, OnlyTheOpenContentsMayDiffer) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto tmpl = ChatTemplate::Create(*model, testing::ReadShippedTemplate("Qwen3.5-4B"));
  ASSERT_TRUE(tmpl.ok());
  const Turn turn = Turns()[3];  // a tool result
  std::vector<ChatMessage> open = turn.history;
  ChatMessage result = turn.next.front();
  result.content = kPlaceholder;
  open.push_back(result);
  ASSERT_TRUE((*tmpl)->RenderAndRemember(open, turn.options, 1).ok());
  auto expect_whole = [&](std::vector<ChatMessage> messages, const RenderOptions& options, const char* what) {
    SCOPED_TRACE(what);
    const size_t before = (*tmpl)->n_spliced();
    auto rendered = (*tmpl)->Render(messages, options);
    ASSERT_TRUE(rendered.ok());
    EXPECT_EQ((*tmpl)->n_spliced(), before);
    EXPECT_EQ(rendered->prompt, (*tmpl)->RenderInFull(messages, options)->prompt);
  };
  std::vector<ChatMessage> messages = open;
  messages.back().content = "42";
  auto earlier = messages;
  earlier[1].content = "Find the FIXMEs.";
  expect_whole(earlier, turn.options, "an earlier message");
  auto other_id = messages;
  other_id.back().tool_call_id = "call_z";
  expect_whole(other_id, turn.options, "the open message's call id");
  auto longer = messages;
  longer.push_back({.role = "user", .content = "and?"});
  expect_whole(longer, turn.options, "one message more");
  RenderOptions no_tools;
  expect_whole(messages, no_tools, "other options");
  const size_t before = (*tmpl)->n_spliced();
  EXPECT_EQ((*tmpl)->Render(messages, turn.options)->prompt, (*tmpl)->RenderInFull(messages, turn.options)->prompt);
  EXPECT_EQ((*tmpl)->n_spliced(), before + 1);
}

}  // namespace
}  // namespace hearth::engine
