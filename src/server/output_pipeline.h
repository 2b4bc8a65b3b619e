// OutputPipeline: one request's sampled tokens on their way to its stream. Each token
// goes through the detokenizer (whole UTF-8 characters only), the stop strings (text
// held back while it may begin one) and, for a chat reply, the output parser (content,
// reasoning and tool calls); what comes out is the deltas to stream. At the end,
// Complete flushes what is held and gives the reply as it was streamed.
//
// Threads: one owner (the engine thread, through the request's Slot).
//
// Invariants:
//  1. The deltas of every Push and of Complete, concatenated, are exactly the reply
//     Complete returns: nothing is streamed that the completion lacks, or the reverse.
//  2. No delta holds any part of a stop string, nor text after one.
//  3. No delta is empty (no content, reasoning or tool call).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "engine/chat_template.h"
#include "engine/detokenizer.h"
#include "engine/model.h"
#include "engine/stop_strings.h"

namespace hearth::server {

class OutputPipeline {
 public:
  // `format`: the reply is a chat reply parsed in that format (control tokens rendered as
  // text for the parser); nullopt: a raw completion, its text as it comes. `model` must
  // outlive the pipeline.
  OutputPipeline(const engine::Model& model, std::vector<std::string> stops,
                 const std::optional<engine::OutputFormat>& format);
  ~OutputPipeline();

  struct Pushed {
    std::vector<api::Delta> deltas;  // to stream now, in order
    bool stopped = false;            // a stop string completed: the text ended before it
    std::string matched;             // which one, when stopped
  };
  // The next generated token (not an end-of-generation one). After a result with
  // stopped == true, further pushes give nothing.
  Pushed Push(engine::Token token);

  struct Completed {
    std::vector<api::Delta> deltas;  // the last ones to stream, before the final event
    // The whole reply: content, reasoning, tool calls, finish_reason (kToolCalls for a
    // kStop reply that called tools) and stop_sequence; usage and timings left to the
    // caller.
    api::Completion completion;
  };
  // The reply ended for `reason`: what the detokenizer, stop strings and parser still
  // hold goes out (unless a stop string ended the text, kStopSequence). Once only.
  Completed Complete(api::FinishReason reason, std::string stop_sequence);

  // The reply parsed so far; null for a raw completion.
  const engine::ParsedOutput* parsed() const;

 private:
  void Parse(const std::string& text, bool is_final, std::vector<api::Delta>& deltas);

  engine::Detokenizer detokenizer_;
  engine::StopStrings stops_;
  std::unique_ptr<engine::OutputParser> parser_;  // null for raw completions
  std::string text_;                              // a raw completion's text so far
};

}  // namespace hearth::server
