// OutputPipeline: tokens of the tiny Qwen3.5 model's vocabulary through the detokenizer,
// stop strings and parser, as the engine loop streams them.
#include "server/output_pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/test_env.h"

namespace hearth::server {
namespace {

// Everything a pipeline streamed, and how it ended.
struct Streamed {
  std::string content, reasoning;  // the deltas, concatenated
  int n_tool_call_deltas = 0;
  size_t pushes_before_stop = 0;   // tokens pushed, the one that completed a stop string included
  bool stopped = false;
  std::string matched;
  std::vector<std::string> final_deltas;  // the content of Complete's deltas
  api::Completion completion;
};

void Collect(const std::vector<api::Delta>& deltas, Streamed& run) {
  for (const api::Delta& d : deltas) {
    EXPECT_FALSE(d.content.empty() && d.reasoning.empty() && d.tool_calls.empty()) << "an empty delta";
    run.content += d.content;
    run.reasoning += d.reasoning;
    run.n_tool_call_deltas += static_cast<int>(d.tool_calls.size());
  }
}

class OutputPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
  }

  // Pushes `text`'s tokens until a stop string ends it, then completes for `reason`
  // (kStopSequence when one did).
  Streamed Stream(const std::string& text, std::vector<std::string> stops,
             const std::optional<engine::OutputFormat>& format, api::FinishReason reason = api::FinishReason::kLength) {
    OutputPipeline p(*model_, std::move(stops), format);
    Streamed run;
    for (engine::Token t : model_->Tokenize(text, /*add_bos=*/false, /*parse_special=*/true)) {
      OutputPipeline::Pushed pushed = p.Push(t);
      ++run.pushes_before_stop;
      Collect(pushed.deltas, run);
      if (pushed.stopped) {
        run.stopped = true;
        run.matched = pushed.matched;
        break;
      }
    }
    OutputPipeline::Completed done = p.Complete(run.stopped ? api::FinishReason::kStopSequence : reason, run.matched);
    for (const api::Delta& d : done.deltas) run.final_deltas.push_back(d.content);
    Collect(done.deltas, run);
    run.completion = done.completion;
    return run;
  }

  // The Qwen3.5 template's output format, with a read_file tool.
  engine::OutputFormat ChatFormat() {
    const engine::ChatTemplate* t = testing::LoadTestTemplate("qwen35");
    EXPECT_NE(t, nullptr);
    if (t == nullptr) return {};
    engine::RenderOptions o;
    o.tools.push_back({.name = "read_file", .description = "reads a file",
                       .parameters = R"({"type":"object","properties":{"path":{"type":"string"}}})"});
    auto r = t->Render(std::vector<engine::ChatMessage>{{.role = "user", .content = "read a.txt"}}, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->output_format : engine::OutputFormat{};
  }

  const engine::Model* model_ = nullptr;
};

TEST_F(OutputPipelineTest, StopStringAcrossTokensEndsTheTextBeforeIt) {
  const std::string text = "hello world, and more after it";
  ASSERT_GT(model_->Tokenize("o wor", false, false).size(), 1u) << "the stop string should span tokens";
  const Streamed run = Stream(text, {"o wor"}, std::nullopt);
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.matched, "o wor");
  EXPECT_EQ(run.content, "hell");  // nothing of the stop string, nothing after it
  EXPECT_TRUE(run.final_deltas.empty());
  EXPECT_EQ(run.completion.content, "hell");
  EXPECT_EQ(run.completion.finish_reason, api::FinishReason::kStopSequence);
  EXPECT_EQ(run.completion.stop_sequence, "o wor");
}

// Text held back because it may begin a stop string goes out when the reply ends.
TEST_F(OutputPipelineTest, FinalFlushReleasesWhatMightHaveBegunAStopString) {
  const Streamed run = Stream("count to the end", {"end of text"}, std::nullopt);
  EXPECT_FALSE(run.stopped);
  EXPECT_EQ(run.content, "count to the end");
  ASSERT_FALSE(run.final_deltas.empty());
  EXPECT_EQ(run.final_deltas.back(), "end");  // held: it might have been "end of text"
  EXPECT_EQ(run.completion.content, "count to the end");
  EXPECT_EQ(run.completion.finish_reason, api::FinishReason::kLength);
}

// A character whose bytes span tokens is held whole; cut off at the end it comes out as
// U+FFFD in the final flush, in the stream and in the completion alike.
TEST_F(OutputPipelineTest, FinalFlushClosesACharacterCutAcrossTokens) {
  const std::string hieroglyph = "\xF0\x93\x80\x80";
  const std::vector<engine::Token> tokens = model_->Tokenize("ok " + hieroglyph, false, false);
  ASSERT_GT(tokens.size(), 2u);
  OutputPipeline p(*model_, {}, std::nullopt);
  Streamed run;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) Collect(p.Push(tokens[i]).deltas, run);  // the last byte never comes
  EXPECT_EQ(run.content, "ok ");
  OutputPipeline::Completed done = p.Complete(api::FinishReason::kLength, "");
  Collect(done.deltas, run);
  EXPECT_EQ(run.content, "ok \xEF\xBF\xBD");
  EXPECT_EQ(done.completion.content, run.content);
}

// A chat reply streams reasoning and content deltas as the parser finds them; the final
// flush closes what is open, and the completion is exactly what was streamed.
TEST_F(OutputPipelineTest, ChatReplyStreamsParserDeltasAndCompletesWithWhatWasStreamed) {
  const Streamed run = Stream("Short thought.\n</think>\n\nHere is the answer.", {}, ChatFormat(), api::FinishReason::kStop);
  EXPECT_EQ(run.completion.reasoning, "Short thought.\n");  // as the parser splits it
  EXPECT_EQ(run.completion.content, "Here is the answer.");
  EXPECT_EQ(run.reasoning, run.completion.reasoning);
  EXPECT_EQ(run.content, run.completion.content);
  EXPECT_EQ(run.completion.finish_reason, api::FinishReason::kStop);
}

// A reply that ends calling a tool finishes as kToolCalls; the call streams as deltas.
TEST_F(OutputPipelineTest, ChatReplyCallingAToolFinishesWithToolCalls) {
  const std::string reply =
      "I will read it.\n</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n"
      "</function>\n</tool_call>";
  const Streamed run = Stream(reply, {}, ChatFormat(), api::FinishReason::kStop);
  ASSERT_EQ(run.completion.tool_calls.size(), 1u);
  EXPECT_EQ(run.completion.tool_calls[0].name, "read_file");
  EXPECT_GT(run.n_tool_call_deltas, 0);
  EXPECT_EQ(run.completion.finish_reason, api::FinishReason::kToolCalls);
}

// Only a chat reply has a parsed output: the reply so far, which the shadow renders from.
TEST_F(OutputPipelineTest, RawCompletionHasNoParsedOutput) {
  OutputPipeline raw(*model_, {}, std::nullopt);
  EXPECT_EQ(raw.parsed(), nullptr);
  OutputPipeline chat(*model_, {}, ChatFormat());
  ASSERT_NE(chat.parsed(), nullptr);
  Streamed run;
  for (engine::Token t : model_->Tokenize("thinking\n</think>\n\nhi", false, true)) Collect(chat.Push(t).deltas, run);
  EXPECT_EQ(chat.parsed()->reasoning, "thinking\n");
}

}  // namespace
}  // namespace hearth::server
