#include "server/output_pipeline.h"

#include <utility>

namespace hearth::server {
namespace {

api::Delta ToApiDelta(const engine::ParsedDelta& d) {
  api::Delta out;
  out.content = d.content;
  out.reasoning = d.reasoning;
  if (d.tool_call_index >= 0) {
    out.tool_calls.push_back({d.tool_call_index, d.tool_call_id, d.tool_call_name, d.tool_call_arguments});
  }
  return out;
}

bool IsEmpty(const api::Delta& d) { return d.content.empty() && d.reasoning.empty() && d.tool_calls.empty(); }

}  // namespace

OutputPipeline::OutputPipeline(const engine::Model& model, std::vector<std::string> stops,
                               const std::optional<engine::OutputFormat>& format) :
    detokenizer_(model, /*render_special=*/format.has_value()), stops_(std::move(stops)) {
  if (format) parser_ = std::make_unique<engine::OutputParser>(*format);
}

OutputPipeline::~OutputPipeline() = default;

const engine::ParsedOutput* OutputPipeline::parsed() const { return parser_ ? &parser_->output() : nullptr; }

void OutputPipeline::Parse(const std::string& text, bool is_final, std::vector<api::Delta>& deltas) {
  for (const auto& d : parser_->Push(text, is_final)) {
    api::Delta delta = ToApiDelta(d);
    if (!IsEmpty(delta)) deltas.push_back(std::move(delta));
  }
}

OutputPipeline::Pushed OutputPipeline::Push(engine::Token token) {
  engine::StopStrings::Result r = stops_.Feed(detokenizer_.Push(token));
  Pushed out;
  if (parser_) {
    Parse(r.text, /*is_final=*/false, out.deltas);
  } else if (!r.text.empty()) {
    text_ += r.text;
    out.deltas.push_back({.content = r.text});
  }
  out.stopped = r.stopped;
  out.matched = std::move(r.matched);
  return out;
}

OutputPipeline::Completed OutputPipeline::Complete(api::FinishReason reason, std::string stop_sequence) {
  std::string tail;
  if (reason != api::FinishReason::kStopSequence) {
    engine::StopStrings::Result r = stops_.Feed(detokenizer_.Flush());
    tail = r.text + (r.stopped ? "" : stops_.Flush());
  }
  Completed out;
  api::Completion& c = out.completion;
  if (parser_) {
    Parse(tail, /*is_final=*/true, out.deltas);
    const engine::ParsedOutput& parsed = parser_->output();
    c.content = parsed.content;
    c.reasoning = parsed.reasoning;
    for (const auto& call : parsed.tool_calls) c.tool_calls.push_back({call.id, call.name, call.arguments});
  } else {
    if (!tail.empty()) out.deltas.push_back({.content = tail});
    c.content = text_ + tail;
  }
  c.finish_reason = reason;
  if (reason == api::FinishReason::kStop && !c.tool_calls.empty()) c.finish_reason = api::FinishReason::kToolCalls;
  c.stop_sequence = std::move(stop_sequence);
  return out;
}

}  // namespace hearth::server
