#include "engine/chat_template.h"

#include <gtest/gtest.h>

#include "testing/test_env.h"

namespace hearth::engine {
namespace {

class ChatTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
    auto t = ChatTemplate::Create(*model_, "");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tmpl_ = std::move(*t);
  }
  const Model* model_ = nullptr;
  std::unique_ptr<ChatTemplate> tmpl_;
};

TEST_F(ChatTemplateTest, GenerationPromptOpensThinkingOrClosesIt) {
  std::vector<ChatMessage> msgs = {{.role = "user", .content = "hi"}};
  RenderOptions on;
  auto a = tmpl_->Render(msgs, on);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->prompt.ends_with("<|im_start|>assistant\n<think>\n")) << a->prompt;
  RenderOptions off;
  off.enable_thinking = false;
  auto b = tmpl_->Render(msgs, off);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->prompt.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << b->prompt;
}

// The template trap: an earlier assistant turn is rendered without its reasoning, so the
// next prompt differs from the tokens the model generated right at that reply.
TEST_F(ChatTemplateTest, EarlierTurnsLoseTheirReasoning) {
  std::vector<ChatMessage> msgs = {
      {.role = "user", .content = "first"},
      {.role = "assistant", .content = "answer one", .reasoning_content = "SECRET-REASONING"},
      {.role = "user", .content = "second"},
  };
  auto r = tmpl_->Render(msgs, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt.find("SECRET-REASONING"), std::string::npos);
  EXPECT_NE(r->prompt.find("<|im_start|>assistant\nanswer one<|im_end|>"), std::string::npos) << r->prompt;
}

TEST_F(ChatTemplateTest, TemplateErrorsComeBackAsValues) {
  std::vector<ChatMessage> only_system = {{.role = "system", .content = "you are terse"}};
  auto r = tmpl_->Render(only_system, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("No user query"), std::string::npos) << r.status().message();
}

TEST_F(ChatTemplateTest, ParserSplitsReasoningFromContent) {
  auto r = tmpl_->Render(std::vector<ChatMessage>{{.role = "user", .content = "hi"}}, {});
  ASSERT_TRUE(r.ok());
  OutputParser p(r->output_format);
  std::string reasoning, content;
  for (const char* piece : {"Let me", " think.", "\n</think>\n\n", "Hello", " there."}) {
    for (const auto& d : p.Push(piece, false)) {
      reasoning += d.reasoning;
      content += d.content;
    }
  }
  for (const auto& d : p.Push("", true)) {
    reasoning += d.reasoning;
    content += d.content;
  }
  EXPECT_FALSE(p.fell_back());
  // The newline before </think> belongs to the reasoning; templates trim it on re-render.
  EXPECT_EQ(p.output().reasoning, "Let me think.\n");
  EXPECT_EQ(p.output().content, "Hello there.");
  EXPECT_EQ(reasoning, p.output().reasoning) << "streamed deltas add up to the whole";
  EXPECT_EQ(content, p.output().content);
}

TEST_F(ChatTemplateTest, ParserReadsQwenToolCalls) {
  RenderOptions o;
  o.tools.push_back({"read_file", "Read a file",
                     R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"});
  auto r = tmpl_->Render(std::vector<ChatMessage>{{.role = "user", .content = "read a.txt"}}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  OutputParser p(r->output_format);
  p.Push("ok\n</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>",
         true);
  EXPECT_FALSE(p.fell_back());
  ASSERT_EQ(p.output().tool_calls.size(), 1u);
  EXPECT_EQ(p.output().tool_calls[0].name, "read_file");
  EXPECT_NE(p.output().tool_calls[0].arguments.find("a.txt"), std::string::npos);
  EXPECT_FALSE(p.output().tool_calls[0].id.empty());
}

// A tool call the model never closed is closed at the end of the reply, its argument kept.
TEST_F(ChatTemplateTest, AnUnclosedToolCallKeepsItsArgument) {
  RenderOptions o;
  o.tools.push_back({"read_file", "Read a file", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  auto r = tmpl_->Render(std::vector<ChatMessage>{{.role = "user", .content = "x"}}, o);
  ASSERT_TRUE(r.ok());
  OutputParser p(r->output_format);
  p.Push("</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\nno end", false);
  p.Push(" </tool_call> <|junk|> </function>", true);
  EXPECT_FALSE(p.fell_back());
  ASSERT_EQ(p.output().tool_calls.size(), 1u) << "content: " << p.output().content;
  EXPECT_EQ(p.output().tool_calls[0].name, "read_file");
  EXPECT_NE(p.output().tool_calls[0].arguments.find("no end"), std::string::npos) << p.output().tool_calls[0].arguments;
}

// Output the parser cannot read (here: no parser at all for the format) becomes plain
// content, streamed as it came: nothing is thrown and no text is lost.
TEST_F(ChatTemplateTest, UnparseableOutputBecomesPlainContent) {
  RenderOptions o;
  o.tools.push_back({"read_file", "Read a file", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  auto r = tmpl_->Render(std::vector<ChatMessage>{{.role = "user", .content = "x"}}, o);
  ASSERT_TRUE(r.ok());
  OutputFormat format = r->output_format;
  format.parser = "{not a serialized parser";
  OutputParser p(format);
  const std::string first = "</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\nno end";
  const std::string second = " </tool_call> <|junk|> </function>";
  std::string streamed;
  for (const auto& d : p.Push(first, false)) streamed += d.content;
  for (const auto& d : p.Push(second, true)) streamed += d.content;
  ASSERT_TRUE(p.fell_back());
  EXPECT_EQ(p.output().content, first + second);
  EXPECT_EQ(streamed, p.output().content);
  EXPECT_TRUE(p.output().tool_calls.empty());
}

}  // namespace
}  // namespace hearth::engine
