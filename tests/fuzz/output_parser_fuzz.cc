// The OutputParser (src/engine/chat_template.h) over arbitrary model text, pushed in
// arbitrary pieces, with the Qwen3.5 template's format (with and without tools, thinking
// on or off): it never crashes or throws, the incremental mode streams exactly the deltas
// parsing at every push streams (invariant 1), and the deltas add up to output().
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "engine/chat_template.h"
#include "fuzz_env.h"

namespace {

using hearth::engine::OutputFormat;
using hearth::engine::OutputParser;
using hearth::engine::ParsedDelta;
using hearth::engine::ParseMode;
using hearth::fuzz::Check;

// The format a request renders, by (tools, thinking).
const OutputFormat& FormatFor(bool tools, bool thinking) {
  static OutputFormat formats[2][2];
  static bool made[2][2] = {};
  if (!made[tools][thinking]) {
    hearth::engine::RenderOptions o;
    o.enable_thinking = thinking;
    if (tools) {
      o.tools = {{"read_file", "Read a file",
                  R"({"type":"object","properties":{"path":{"type":"string"},"lines":{"type":"integer"}},"required":["path"]})"},
                 {"run", "Run a command", R"({"type":"object","properties":{"cmd":{"type":"string"}}})"}};
    }
    const std::vector<hearth::engine::ChatMessage> messages = {{.role = "user", .content = "hi"}};
    auto r = hearth::fuzz::TinyTemplate().Render(messages, o);
    Check(r.ok(), "the fuzz request renders");
    formats[tools][thinking] = r->output_format;
    made[tools][thinking] = true;
  }
  return formats[tools][thinking];
}

bool SameDelta(const ParsedDelta& a, const ParsedDelta& b) {
  return a.content == b.content && a.reasoning == b.reasoning && a.tool_call_index == b.tool_call_index &&
         a.tool_call_id == b.tool_call_id && a.tool_call_name == b.tool_call_name &&
         a.tool_call_arguments == b.tool_call_arguments;
}

// What the deltas streamed so far add up to.
struct Sum {
  std::string content, reasoning;
  std::vector<std::string> names, arguments;
  void Add(const ParsedDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    if (d.tool_call_index < 0) return;
    const size_t i = static_cast<size_t>(d.tool_call_index);
    Check(i <= names.size(), "tool calls are numbered in order");
    if (i == names.size()) {
      names.push_back(d.tool_call_name);
      arguments.emplace_back();
    }
    arguments[i] += d.tool_call_arguments;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t flags = in.ConsumeIntegral<uint8_t>();
  const OutputFormat& format = FormatFor(flags & 1, flags & 2);
  // Pieces as the Detokenizer streams them: valid UTF-8 (of any length, empty too).
  std::vector<std::string> pieces;
  while (in.remaining_bytes() > 0 && pieces.size() < 256) {
    pieces.push_back(hearth::SanitizeUtf8(in.ConsumeRandomLengthString(64)));
  }

  OutputParser incremental(format, ParseMode::kIncremental);
  OutputParser reference(format, ParseMode::kParseEveryPush);
  Sum sum;
  for (size_t i = 0; i <= pieces.size(); ++i) {
    const bool last = i == pieces.size();
    const std::string& piece = last ? std::string() : pieces[i];
    const std::vector<ParsedDelta> got = incremental.Push(piece, last);
    const std::vector<ParsedDelta> want = reference.Push(piece, last);
    Check(got.size() == want.size(), "incremental parsing streams as many deltas as parsing every push");
    for (size_t j = 0; j < got.size(); ++j) {
      Check(SameDelta(got[j], want[j]), "incremental parsing streams the deltas parsing every push does");
      sum.Add(got[j]);
    }
  }
  const auto& out = incremental.output();
  Check(incremental.fell_back() == reference.fell_back(), "both modes fall back alike");
  Check(sum.content == out.content && sum.reasoning == out.reasoning, "the deltas add up to the output");
  Check(sum.names.size() == out.tool_calls.size(), "every tool call was streamed");
  for (size_t i = 0; i < out.tool_calls.size(); ++i) {
    Check(sum.names[i] == out.tool_calls[i].name && sum.arguments[i] == out.tool_calls[i].arguments,
          "tool call deltas add up to the call");
  }
  return 0;
}
