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

static_assert(COMMON_REASONING_FORMAT_DEEPSEEK == OutputFormat::kSplitReasoning,
              "OutputFormat's default reasoning format is llama.cpp's DEEPSEEK");

StatusOr<RenderedPrompt> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                              const RenderOptions& options) const {
  common_chat_templates_inputs in;
  for (const auto& m : messages) in.messages.push_back(ToCommon(m));
  in.add_generation_prompt = options.add_generation_prompt;
  in.enable_thinking = options.enable_thinking;
  in.use_jinja = true;
  in.reasoning_format = options.reasoning_format == "none"              ? COMMON_REASONING_FORMAT_NONE
                       : options.reasoning_format == "deepseek-legacy" ? COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY
                                                                       : COMMON_REASONING_FORMAT_DEEPSEEK;
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
    out.output_format.reasoning_format = static_cast<int>(in.reasoning_format);
    out.output_format.parser = std::move(p.parser);
    out.output_format.generation_prompt = out.generation_prompt;
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the chat template rejected the conversation: ") + e.what());
  }
}

}  // namespace hearth::engine
