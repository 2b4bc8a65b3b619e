// ChatTemplate: renders a conversation into prompt text with the model's own Jinja chat
// template, through llama.cpp's common chat library (the same renderer llama-server
// uses), so hearth sees exactly the prompt any llama.cpp-based server would build.
//
// Thread safety: Render and RenderAndRemember may be called from any thread at once (what
// RenderAndRemember keeps sits behind a mutex; nothing else changes after Create). The
// Model must outlive it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model.h"

namespace hearth::engine {

struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the client sent it
  bool operator==(const ChatToolCall&) const = default;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::string reasoning_content;
  std::vector<ChatToolCall> tool_calls;
  std::string tool_call_id;  // for role "tool"
  std::string tool_name;     // for role "tool"
  bool operator==(const ChatMessage&) const = default;
};

struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON schema text
  bool operator==(const ChatTool&) const = default;
};

struct RenderOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;
  std::vector<ChatTool> tools;
  std::string tool_choice = "auto";  // "auto", "none", "required"
  bool parallel_tool_calls = false;
  std::map<std::string, std::string> template_kwargs;  // values are JSON text
  // Where the model's thinking goes, as llama-server's --reasoning-format: "auto" and
  // "deepseek" split it into reasoning; "deepseek-legacy" also leaves it in the content;
  // "none" leaves it in the content only.
  std::string reasoning_format = "auto";
  bool operator==(const RenderOptions&) const = default;
};

// How to read the model's output back: opaque to callers, made by Render, consumed by
// OutputParser.
struct OutputFormat {
  int format = 0;                 // llama.cpp's common_chat_format
  std::string parser;             // serialized PEG parser for this template and tool set
  std::string generation_prompt;  // text the template put after the last message
  static constexpr int kSplitReasoning = 3;      // llama.cpp's COMMON_REASONING_FORMAT_DEEPSEEK
  int reasoning_format = kSplitReasoning;       // llama.cpp's common_reasoning_format
  bool operator==(const OutputFormat&) const = default;
};

struct RenderedPrompt {
  std::string prompt;
  std::string generation_prompt;  // e.g. "<|im_start|>assistant\n<think>\n"
  std::vector<std::string> additional_stops;
  bool supports_thinking = false;
  OutputFormat output_format;
  bool operator==(const RenderedPrompt&) const = default;
};

// What the model said so far, split into reasoning, content and tool calls.
struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ChatToolCall> tool_calls;
};

// One increment of a ParsedOutput, for streaming.
struct ParsedDelta {
  std::string content;
  std::string reasoning;
  int tool_call_index = -1;  // -1: no tool call in this delta
  std::string tool_call_id;  // set on a call's first delta
  std::string tool_call_name;
  std::string tool_call_arguments;
};

// How OutputParser decides when to run llama.cpp's parser, which always reads the whole
// reply. kIncremental parses only when new text could change more than the end of the
// open content or reasoning run (output_parser.cc says how); kParseEveryPush parses at
// every Push, the reference the incremental mode must match delta for delta (tests and
// measurements only).
enum class ParseMode { kIncremental, kParseEveryPush };

// OutputParser: incremental parse of generated text with the template's format.
// Output that does not parse in that format is never an error: the parser falls back to
// returning the raw text as content (fell_back() then reports it), because a client is
// better served by the text than by a failed request. A reply whose end the format does
// not reach (a call to an unknown tool, arguments that are not JSON, text after the
// calls: llama.cpp's lenient parse would skip them) falls back too, when it is final.
//
// Invariants:
//   1. The deltas Push returns, in order, are those kParseEveryPush returns for the same
//      pushes; concatenated, they add up to output().
//   2. With is_final, output() is the parse of the whole text (or the fallback); no text
//      of the reply is lost (the fallback repeats text it cannot place rather than drop it).
//
// Thread safety: one owner.
class OutputParser {
 public:
  explicit OutputParser(const OutputFormat& format, ParseMode mode = ParseMode::kIncremental);
  ~OutputParser();

  // Appends `text` and returns what changed. `is_final`: no more text will come (partial
  // constructs are then closed or given up). Plain text inside content or reasoning costs
  // O(text); any other push parses the whole reply so far.
  std::vector<ParsedDelta> Push(const std::string& text, bool is_final);
  const ParsedOutput& output() const { return output_; }
  bool fell_back() const { return fell_back_; }
  // How many times llama.cpp's parser ran, for tests and measurements.
  int64_t n_parses() const { return n_parses_; }

 private:
  struct Impl;
  bool ExtendsOpenRun(const std::string& text) const;
  void FindOpenRun();

  std::unique_ptr<Impl> impl_;
  ParsedOutput output_;
  bool fell_back_ = false;
  int64_t n_parses_ = 0;
};

class ChatTemplate {
 public:
  // Uses `override_source` when not empty, else the model's embedded template.
  // Errors: kInvalidArgument when the template does not parse, or the model has none and no
  // override was given.
  static StatusOr<std::unique_ptr<ChatTemplate>> Create(const Model& model, const std::string& override_source);
  ~ChatTemplate();

  // Errors: kInvalidArgument with the template's message when it rejects the conversation
  // (e.g. a role it does not know, or no user message).
  // One Jinja pass over the conversation where the template allows it (one_pass_render.h
  // says when), else llama.cpp's full render; the result is the same either way.
  // A conversation remembered with RenderAndRemember whose open messages now hold other
  // contents has those contents spliced into the remembered rendering (splice_render.h).
  StatusOr<RenderedPrompt> Render(std::span<const ChatMessage> messages, const RenderOptions& options) const;
  // Render, remembering the result for the conversation's next request: the last `n_open`
  // messages all hold the same placeholder content, which that request replaces with its
  // own (the next user message, or the results of the reply's tool calls).
  StatusOr<RenderedPrompt> RenderAndRemember(std::span<const ChatMessage> messages, const RenderOptions& options,
                                             size_t n_open) const;
  // How many renders were spliced, for tests and measurements.
  size_t n_spliced() const;
  // llama.cpp's common_chat_templates_apply, which renders the conversation three times:
  // the reference Render must equal (tests and measurements).
  StatusOr<RenderedPrompt> RenderInFull(std::span<const ChatMessage> messages, const RenderOptions& options) const;
  // Whether Render can take the one-pass path for this template.
  bool renders_in_one_pass() const;

  const std::string& source() const { return source_; }

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl, std::string source);
  std::unique_ptr<Impl> impl_;
  std::string source_;
};

}  // namespace hearth::engine
