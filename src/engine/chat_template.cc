#include "engine/chat_template.h"

#include <exception>

#include "chat.h"
#include "llama.h"

namespace hearth::engine {

struct ChatTemplate::Impl {
  common_chat_templates_ptr templates;
};

namespace {

common_chat_msg ToCommon(const ChatMessage& m) {
  common_chat_msg out;
  out.role = m.role;
  out.content = m.content;
  out.reasoning_content = m.reasoning_content;
  out.tool_call_id = m.tool_call_id;
  out.tool_name = m.tool_name;
  for (const auto& c : m.tool_calls) out.tool_calls.push_back({c.name, c.arguments, c.id});
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(const Model& model, const std::string& override_source) {
  if (override_source.empty() && model.info().chat_template.empty()) {
    return InvalidArgument("the model has no chat template; pass one with --chat-template-file");
  }
  auto impl = std::make_unique<Impl>();
  try {
    impl->templates = common_chat_templates_init(model.raw(), override_source);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template does not parse: ") + e.what());
  }
  if (!impl->templates) return InvalidArgument("chat template could not be loaded");
  std::string source = common_chat_templates_source(impl->templates.get());
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(impl), std::move(source)));
}

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl, std::string source)
    : impl_(std::move(impl)), source_(std::move(source)) {}

ChatTemplate::~ChatTemplate() = default;

StatusOr<RenderedPrompt> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                              const RenderOptions& options) const {
  common_chat_templates_inputs in;
  for (const auto& m : messages) in.messages.push_back(ToCommon(m));
  in.add_generation_prompt = options.add_generation_prompt;
  in.enable_thinking = options.enable_thinking;
  in.use_jinja = true;
  // Reasoning is always split out of the content; the API layer decides what to show.
  in.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
  in.parallel_tool_calls = options.parallel_tool_calls;
  in.chat_template_kwargs = options.template_kwargs;
  for (const auto& t : options.tools) in.tools.push_back({t.name, t.description, t.parameters});
  try {
    in.tool_choice = common_chat_tool_choice_parse_oaicompat(options.tool_choice);
    common_chat_params p = common_chat_templates_apply(impl_->templates.get(), in);
    RenderedPrompt out;
    out.prompt = std::move(p.prompt);
    out.generation_prompt = std::move(p.generation_prompt);
    out.additional_stops = std::move(p.additional_stops);
    out.supports_thinking = p.supports_thinking;
    out.output_format.format = static_cast<int>(p.format);
    out.output_format.parser = std::move(p.parser);
    out.output_format.generation_prompt = out.generation_prompt;
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the chat template rejected the conversation: ") + e.what());
  }
}

}  // namespace hearth::engine

namespace hearth::engine {

struct OutputParser::Impl {
  common_chat_parser_params params;
  common_chat_msg last;
  std::string text;
  std::vector<std::string> tool_call_ids;
  int next_id = 0;
};

namespace {

ParsedOutput FromCommon(const common_chat_msg& m) {
  ParsedOutput out;
  out.content = m.content;
  out.reasoning = m.reasoning_content;
  for (const auto& c : m.tool_calls) out.tool_calls.push_back({c.id, c.name, c.arguments});
  return out;
}

}  // namespace

OutputParser::OutputParser(const OutputFormat& format) : impl_(std::make_unique<Impl>()) {
  impl_->params.format = static_cast<common_chat_format>(format.format);
  impl_->params.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
  impl_->params.generation_prompt = format.generation_prompt;
  impl_->params.parse_tool_calls = true;
  if (!format.parser.empty()) {
    try {
      impl_->params.parser.load(format.parser);
    } catch (const std::exception&) {
      fell_back_ = true;
    }
  }
}

OutputParser::~OutputParser() = default;

std::vector<ParsedDelta> OutputParser::Push(const std::string& text, bool is_final) {
  impl_->text += text;
  std::vector<ParsedDelta> deltas;
  if (fell_back_) {
    if (!text.empty()) deltas.push_back({.content = text});
    output_.content += text;
    return deltas;
  }
  common_chat_msg next;
  try {
    next = common_chat_parse(impl_->text, /*is_partial=*/!is_final, impl_->params);
  } catch (const std::exception&) {
    // Not in the expected format: from here on everything is plain content. What was
    // already streamed as content stays; reasoning or tool calls sent so far stay sent.
    fell_back_ = true;
    const std::string& all = impl_->text;
    const bool continues = all.starts_with(output_.content);
    std::string unsent = continues ? all.substr(output_.content.size()) : all;
    if (!unsent.empty()) deltas.push_back({.content = unsent});
    output_.content += unsent;
    return deltas;
  }
  if (next.empty() && !is_final) return deltas;
  // Stable tool call ids across partial parses.
  for (size_t i = 0; i < next.tool_calls.size(); ++i) {
    if (impl_->tool_call_ids.size() <= i) {
      std::string id = next.tool_calls[i].id;
      if (id.empty()) id = "call_" + std::to_string(impl_->next_id++);
      impl_->tool_call_ids.push_back(id);
    }
    next.tool_calls[i].id = impl_->tool_call_ids[i];
  }
  for (auto& d : common_chat_msg_diff::compute_diffs(impl_->last, next)) {
    ParsedDelta pd;
    pd.content = std::move(d.content_delta);
    pd.reasoning = std::move(d.reasoning_content_delta);
    if (d.tool_call_index != std::string::npos) {
      pd.tool_call_index = static_cast<int>(d.tool_call_index);
      pd.tool_call_id = d.tool_call_delta.id;
      pd.tool_call_name = d.tool_call_delta.name;
      pd.tool_call_arguments = d.tool_call_delta.arguments;
    }
    deltas.push_back(std::move(pd));
  }
  impl_->last = std::move(next);
  output_ = FromCommon(impl_->last);
  return deltas;
}

}  // namespace hearth::engine
