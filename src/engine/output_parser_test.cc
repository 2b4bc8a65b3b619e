#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/chat_template.h"
#include "engine/detokenizer.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

std::string Show(const ParsedDelta& d) {
  std::ostringstream s;
  s << "{c=\"" << d.content << "\" r=\"" << d.reasoning << "\" tool=" << d.tool_call_index << " id=\""
    << d.tool_call_id << "\" name=\"" << d.tool_call_name << "\" args=\"" << d.tool_call_arguments << "\"}";
  return s.str();
}

// Every delta of every push, in order, and the parse at the end.
struct Streamed {
  std::vector<std::string> deltas;
  std::string content, reasoning, calls;
  bool fell_back = false;
  int64_t n_parses = 0;
  double seconds = 0;
};

Streamed Stream(const OutputFormat& format, ParseMode mode, const std::vector<std::string>& pieces) {
  OutputParser p(format, mode);
  Streamed s;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i <= pieces.size(); ++i) {
    const bool last = i == pieces.size();
    for (const auto& d : p.Push(last ? std::string() : pieces[i], last)) s.deltas.push_back(Show(d));
    s.deltas.push_back("|");  // push boundary: the same deltas must come at the same push
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.content = p.output().content;
  s.reasoning = p.output().reasoning;
  for (const auto& c : p.output().tool_calls) s.calls += c.id + ":" + c.name + ":" + c.arguments + ";";
  s.fell_back = p.fell_back();
  s.n_parses = p.n_parses();
  return s;
}

// The reply cut the way the model's tokens cut it.
std::vector<std::string> TokenPieces(const Model& model, const std::string& reply) {
  Detokenizer detok(model, /*render_special=*/true);
  std::vector<std::string> pieces;
  for (Token t : model.Tokenize(reply, /*add_bos=*/false, /*parse_special=*/true)) pieces.push_back(detok.Push(t));
  pieces.push_back(detok.Flush());
  return pieces;
}

std::vector<std::string> BytePieces(const std::string& reply, size_t n) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < reply.size(); i += n) pieces.push_back(reply.substr(i, n));
  return pieces;
}

void ExpectSameStream(const OutputFormat& format, const std::vector<std::string>& pieces, const std::string& what) {
  const Streamed want = Stream(format, ParseMode::kParseEveryPush, pieces);
  const Streamed got = Stream(format, ParseMode::kIncremental, pieces);
  ASSERT_EQ(got.deltas.size(), want.deltas.size()) << what;
  for (size_t i = 0; i < want.deltas.size(); ++i) ASSERT_EQ(got.deltas[i], want.deltas[i]) << what << " at " << i;
  EXPECT_EQ(got.content, want.content) << what;
  EXPECT_EQ(got.reasoning, want.reasoning) << what;
  EXPECT_EQ(got.calls, want.calls) << what;
  EXPECT_EQ(got.fell_back, want.fell_back) << what;
}

const std::vector<ChatTool>& Tools() {
  static const std::vector<ChatTool> tools = {
      {"read_file", "Read a file",
       R"({"type":"object","properties":{"path":{"type":"string"},"lines":{"type":"integer"}},"required":["path"]})"},
      {"run", "Run a command", R"({"type":"object","properties":{"cmd":{"type":"string"},"bg":{"type":"boolean"}}})"}};
  return tools;
}

// Replies in the shapes the templates below produce: Qwen's XML calls, JSON calls in
// <tool_call> tags, bare text with markup characters, unfinished constructs.
const std::vector<std::string>& Replies() {
  static const std::vector<std::string> replies = {
      "The user wants a.txt. I should read it, then answer.\n</think>\n\nSure, reading it now. "
      "Then I'll run `ls -l` for you.\n\n<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n"
      "</parameter>\n<parameter=lines>\n20\n</parameter>\n</function>\n</tool_call>",
      "Short thought.\n</think>\n\nHere is code: if (a < b && c > d) { x = \"y\"; } [1, 2] ok.",
      "<think>\nplan: call run\n</think>\n\n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"cmd\": \"ls\", "
      "\"bg\": false}}\n</tool_call>",
      "No reasoning markers here, only a plain answer with ünïcödé ✓ and 日本語 and a trailing space ",
      "Thinking about <tool and </thi partial markers\n</think>\n\nAnswer with < and <tool_call> unfinished",
      "   \n</think>\n\n  leading spaces, then text.\n\n\n",
  };
  return replies;
}

// A long reasoning + content + tool call reply, n_words words before the call.
std::string LongReply(int n_words) {
  static const char* kWords[] = {"the", "model", "reads", "every", "file", "once", "and", "then", "answers,",
                                 "carefully", "checking", "a < b", "(that)", "line.\n", "results:", "ok"};
  std::string reasoning, content;
  for (int i = 0; i < n_words / 2; ++i) reasoning += std::string(i ? " " : "") + kWords[i % 16];
  for (int i = 0; i < n_words / 2; ++i) content += std::string(i ? " " : "") + kWords[(i * 7) % 16];
  return reasoning + "\n</think>\n\n" + content +
         "\n\n<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>";
}

class OutputParserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
  }

  // The format `source` (empty: the model's own Qwen3.5 template) renders with tools.
  OutputFormat FormatOf(const std::string& source, bool tools) {
    auto t = ChatTemplate::Create(*model_, source);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return {};
    RenderOptions o;
    if (tools) o.tools = Tools();
    auto r = (*t)->Render(std::vector<ChatMessage>{{.role = "user", .content = "read a.txt"}}, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->output_format : OutputFormat{};
  }

  const Model* model_ = nullptr;
};

// The incremental parser streams exactly what parsing the whole text at every push
// streams, for the Qwen3.5 template, with and without tools, cut into tokens or bytes.
TEST_F(OutputParserTest, StreamsTheSameDeltasAsParsingEveryPush) {
  for (bool tools : {true, false}) {
    const OutputFormat format = FormatOf("", tools);
    for (size_t r = 0; r < Replies().size(); ++r) {
      const std::string& reply = Replies()[r];
      const std::string what = "reply " + std::to_string(r) + (tools ? " with tools" : "");
      ExpectSameStream(format, TokenPieces(*model_, reply), what + ", tokens");
      for (size_t n : {1, 2, 5}) ExpectSameStream(format, BytePieces(reply, n), what + ", bytes of " + std::to_string(n));
    }
  }
}

// The same for every chat template llama.cpp ships: each has its own parser, markers and
// quirks (trimmed whitespace, JSON calls, several reasoning blocks).
TEST_F(OutputParserTest, StreamsTheSameDeltasForEveryLlamaCppTemplate) {
  const std::filesystem::path dir = std::filesystem::path(testing::LlamaModelsDir()) / "templates";
  int n_templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path());
    std::stringstream source;
    source << in.rdbuf();
    auto t = ChatTemplate::Create(*model_, source.str());
    if (!t.ok()) continue;  // a template this build cannot load is not the parser's business
    RenderOptions o;
    o.tools = Tools();
    auto r = (*t)->Render(std::vector<ChatMessage>{{.role = "user", .content = "read a.txt"}}, o);
    if (!r.ok()) continue;
    ++n_templates;
    for (size_t i = 0; i < Replies().size(); ++i) {
      const std::string what = entry.path().filename().string() + " reply " + std::to_string(i);
      ExpectSameStream(r->output_format, TokenPieces(*model_, Replies()[i]), what);
      ExpectSameStream(r->output_format, BytePieces(Replies()[i], 3), what + ", bytes of 3");
    }
  }
  EXPECT_GE(n_templates, 40) << "most of llama.cpp's templates load and render";
}

// The point of it: a long reply is parsed a few times, not once per token, and streams
// the same deltas. HEARTH_PARSE_BENCH_WORDS sets the length (docs/architecture.md has
// the numbers at 8k and 32k tokens).
TEST_F(OutputParserTest, LongReplyIsNotReparsedAtEveryToken) {
  const char* env = std::getenv("HEARTH_PARSE_BENCH_WORDS");
  const int n_words = env ? std::atoi(env) : 1500;
  const OutputFormat format = FormatOf("", /*tools=*/true);
  const std::vector<std::string> pieces = TokenPieces(*model_, LongReply(n_words));
  const Streamed want = Stream(format, ParseMode::kParseEveryPush, pieces);
  const Streamed got = Stream(format, ParseMode::kIncremental, pieces);
  const double n = static_cast<double>(pieces.size());
  std::printf("%zu tokens: parse every token %lld parses %.3f s (%.1f us/token); incremental %lld parses %.3f s "
              "(%.1f us/token)\n",
              pieces.size(), static_cast<long long>(want.n_parses), want.seconds, 1e6 * want.seconds / n,
              static_cast<long long>(got.n_parses), got.seconds, 1e6 * got.seconds / n);
  EXPECT_EQ(got.deltas, want.deltas);
  EXPECT_EQ(got.calls, want.calls);
  EXPECT_FALSE(got.calls.empty());
  EXPECT_GE(want.n_parses, static_cast<int64_t>(pieces.size()));
  // Full parses only around marker bytes ('<' in "a < b", the closing markers, the call).
  EXPECT_LT(got.n_parses, static_cast<int64_t>(pieces.size()) / 4);
}

}  // namespace
}  // namespace hearth::engine

namespace hearth::engine {
namespace {

// --reasoning-format none leaves the thinking in the content, as llama-server does.
TEST(OutputParserReasoningFormatTest, NoneLeavesThinkingInTheContent) {
  const Model* model = testing::LoadTestModel("qwen35");
  ASSERT_NE(model, nullptr);
  auto t = ChatTemplate::Create(*model, "");
  ASSERT_TRUE(t.ok());
  auto parse = [&](const char* format) {
    RenderOptions o;
    o.reasoning_format = format;
    auto r = (*t)->Render(std::vector<ChatMessage>{{.role = "user", .content = "hi"}}, o);
    EXPECT_TRUE(r.ok());
    OutputParser p(r->output_format, ParseMode::kIncremental);
    p.Push("let me think\n</think>\n\nthe answer", /*is_final=*/true);
    return p.output();
  };
  const ParsedOutput split = parse("auto");
  EXPECT_EQ(split.reasoning, "let me think\n");
  EXPECT_EQ(split.content, "the answer");
  const ParsedOutput none = parse("none");
  EXPECT_TRUE(none.reasoning.empty());
  EXPECT_NE(none.content.find("let me think"), std::string::npos) << none.content;
}

}  // namespace
}  // namespace hearth::engine

namespace hearth::engine {
namespace {

// llama.cpp's lenient parse reads a reply whose tail does not fit the format as what came
// before the tail. Nothing the model wrote may be lost: such a reply falls back to
// content from where what was streamed ends, and a reply in the format does not.
TEST_F(OutputParserTest, AReplyWhoseTailIsNotInTheFormatKeepsItsText) {
  const auto format = FormatOf("", true);
  const std::string call = "<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>";
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"ok\n</think>\n\n<tool_call>\n<function=nonexistent_tool>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
       "nonexistent_tool"},
      {"ok\n</think>\n\n<tool_call>\n{\"name\": \"run\", \"arguments\": {broken json}}\n</tool_call>", "broken json"},
      {"ok\n</think>\n\ntext <tool_call>garbage</tool_call> more", "<tool_call>garbage</tool_call> more"},
      {"ok\n</think>\n\ntext " + call + " and text after it", " and text after it"},
  };
  for (const auto& [reply, tail] : malformed) {
    for (const auto& pieces : {TokenPieces(*model_, reply), BytePieces(reply, 7)}) {
      const Streamed s = Stream(format, ParseMode::kIncremental, pieces);
      EXPECT_TRUE(s.fell_back) << reply;
      EXPECT_NE(s.content.find(tail), std::string::npos) << reply << "\ncontent: " << s.content;
      EXPECT_EQ(s.reasoning, "ok\n") << reply;
      ExpectSameStream(format, pieces, reply);
    }
  }
  // "text " was streamed as content before the tail: it is not sent twice.
  const Streamed once = Stream(format, ParseMode::kIncremental, TokenPieces(*model_, malformed[2].first));
  EXPECT_EQ(once.content, "text <tool_call>garbage</tool_call> more");
  for (const std::string& reply : {Replies()[0], LongReply(200), "ok\n</think>\n\n" + call + "\n\n"}) {
    const Streamed s = Stream(format, ParseMode::kIncremental, TokenPieces(*model_, reply));
    EXPECT_FALSE(s.fell_back) << reply;
    EXPECT_FALSE(s.calls.empty()) << reply;
  }
}

}  // namespace
}  // namespace hearth::engine
