#include "engine/chat_template.h"

#include <exception>

#include "chat.h"
#include "engine/one_pass_render.h"
#include "engine/splice_render.h"
#include "llama.h"

namespace hearth::engine {

struct ChatTemplate::Impl {
  common_chat_templates_ptr templates;
  std::unique_ptr<OnePassRender> one_pass;  // null: every render is a full one
  std::unique_ptr<SpliceRender> splice;      // its renders are the whole ones below
  // One pass where the template allows, else in full.
  StatusOr<RenderedPrompt> RenderWhole(std::span<const ChatMessage> messages, const RenderOptions& options) const;
  StatusOr<RenderedPrompt> RenderInFull(std::span<const ChatMessage> messages, const RenderOptions& options) const;
};

StatusOr<RenderedPrompt> ChatTemplate::Impl::RenderWhole(std::span<const ChatMessage> messages,
                                                         const RenderOptions& options) const {
  if (one_pass) {
    if (auto once = one_pass->Render(messages, options)) return std::move(*once);
  }
  return RenderInFull(messages, options);
}

StatusOr<RenderedPrompt> ChatTemplate::Impl::RenderInFull(std::span<const ChatMessage> messages,
                                                          const RenderOptions& options) const {
  try {
    return FullRender(templates.get(), messages, options);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the chat template rejected the conversation: ") + e.what());
  }
}

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
  impl->one_pass = OnePassRender::Create(impl->templates.get(), model.vocab());
  const Impl* whole = impl.get();
  impl->splice = std::make_unique<SpliceRender>(
      [whole](std::span<const ChatMessage> messages, const RenderOptions& options) {
        return whole->RenderWhole(messages, options);
      });
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
  if (auto spliced = impl_->splice->Render(messages, options)) return std::move(*spliced);
  return impl_->RenderWhole(messages, options);
}

StatusOr<RenderedPrompt> ChatTemplate::RenderAndRemember(std::span<const ChatMessage> messages,
                                                         const RenderOptions& options, size_t n_open) const {
  return impl_->splice->RenderAndRemember(messages, options, n_open);
}

StatusOr<RenderedPrompt> ChatTemplate::RenderInFull(std::span<const ChatMessage> messages,
                                                    const RenderOptions& options) const {
  return impl_->RenderInFull(messages, options);
}

size_t ChatTemplate::n_spliced() const { return impl_->splice->n_spliced(); }

bool ChatTemplate::renders_in_one_pass() const { return impl_->one_pass != nullptr; }

}  // namespace hearth::engine
