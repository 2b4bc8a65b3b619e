#include "engine/chat_template.h"

#include <cstdio>
#include <exception>
#include <vector>

#include "chat.h"
#include "engine/skeleton_render.h"
#include "llama.h"

namespace hearth::engine {

struct ChatTemplate::Impl {
  common_chat_templates_ptr templates;
  std::unique_ptr<SkeletonGuard> guard;
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

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(const Model& model, const std::string& override_source,
                                                             bool skeleton) {
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
  // Both variants' literals: a request with tools renders with the tool-use one.
  impl->guard = std::make_unique<SkeletonGuard>(source + common_chat_templates_source(impl->templates.get(), "tool_use"));
  auto out = std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(impl), std::move(source)));
  out->disabled_ = !skeleton;
  return out;
}

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl, std::string source)
    : impl_(std::move(impl)), source_(std::move(source)) {}

ChatTemplate::~ChatTemplate() = default;

static_assert(COMMON_REASONING_FORMAT_DEEPSEEK == OutputFormat::kSplitReasoning,
              "OutputFormat's default reasoning format is llama.cpp's DEEPSEEK");

StatusOr<RenderedPrompt> ChatTemplate::RenderFull(std::span<const ChatMessage> messages,
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

namespace {

bool SameRender(const RenderedPrompt& a, const RenderedPrompt& b) {
  return a.prompt == b.prompt && a.generation_prompt == b.generation_prompt &&
         a.additional_stops == b.additional_stops && a.supports_thinking == b.supports_thinking &&
         a.output_format.format == b.output_format.format && a.output_format.parser == b.output_format.parser &&
         a.output_format.generation_prompt == b.output_format.generation_prompt &&
         a.output_format.reasoning_format == b.output_format.reasoning_format;
}

}  // namespace

// nullopt: no text could be stood in, or the skeleton's render did not restore.
std::optional<StatusOr<RenderedPrompt>> ChatTemplate::Skeleton(std::span<const ChatMessage> messages,
                                                                const RenderOptions& options) const {
  std::vector<Standin> standins;
  std::vector<ChatMessage> skeleton(messages.begin(), messages.end());
  for (auto& m : skeleton) {
    m.content = StandIn(m.content, *impl_->guard, &standins);
    m.reasoning_content = StandIn(m.reasoning_content, *impl_->guard, &standins);
  }
  if (standins.empty()) return std::nullopt;
  auto r = RenderFull(skeleton, options);
  if (!r.ok()) return r;  // the template rejected the conversation, as it would in full
  auto prompt = Restore(r->prompt, standins);
  auto generation_prompt = Restore(r->generation_prompt, standins);
  if (!prompt || !generation_prompt || HasMarker(r->output_format.parser)) return std::nullopt;
  for (const auto& s : r->additional_stops) {
    if (HasMarker(s)) return std::nullopt;
  }
  r->prompt = std::move(*prompt);
  r->generation_prompt = std::move(*generation_prompt);
  r->output_format.generation_prompt = r->generation_prompt;
  return r;
}

std::optional<RenderedPrompt> ChatTemplate::RenderSkeleton(std::span<const ChatMessage> messages,
                                                           const RenderOptions& options) const {
  auto r = Skeleton(messages, options);
  if (!r || !r->ok()) return std::nullopt;
  return std::move(**r);
}

StatusOr<RenderedPrompt> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                              const RenderOptions& options) const {
  if (disabled_.load()) return RenderFull(messages, options);
  auto fast = Skeleton(messages, options);
  if (!fast) return RenderFull(messages, options);
  const int64_t n = eligible_.fetch_add(1);
  if (agreed_.load() >= kTrustAfter && n % kAuditEvery != 0) {
    fast_.fetch_add(1);
    return std::move(*fast);
  }
  auto full = RenderFull(messages, options);
  audits_.fetch_add(1);
  const bool same = full.ok() ? fast->ok() && SameRender(**fast, *full) : !fast->ok();
  if (same) {
    agreed_.fetch_add(1);
  } else {
    mismatches_.fetch_add(1);
    if (!disabled_.exchange(true)) {
      std::fprintf(stderr, "hearth: the chat template's skeleton render differed from its full render; rendering "
                           "every request in full from now on\n");
    }
  }
  return full;
}

ChatTemplate::SkeletonStats ChatTemplate::skeleton_stats() const {
  return {fast_.load(), audits_.load(), mismatches_.load(), disabled_.load()};
}

}  // namespace hearth::engine
