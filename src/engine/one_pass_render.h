// OnePassRender: a conversation's prompt from one pass of its Jinja template. Private to
// engine/ (ChatTemplate is the public face).
//
// llama.cpp's common_chat_templates_apply renders the whole conversation three times (the
// prompt, then without and with the generation prompt, to tell the generation prompt
// apart) and analyses the template again on every call: about 20 ms per request at 40k
// tokens on a CPU, growing with the conversation. Everything it returns besides the prompt
// (generation prompt, output parser, stops, format) depends on the options and on the
// conversation's shape, not on what its messages say. So here:
//   - the prompt is one common_chat_template_direct_apply of the messages, prepared for the
//     template the way common_chat_templates_apply_jinja prepares them (llama.cpp 3.21.1's
//     common/chat.cpp: messages to JSON, content typed where the template wants parts, the
//     developer role as system, a system message merged into the next where the template has
//     no system role, tool arguments parsed where it wants objects, the date and the kwargs);
//   - the rest comes from a full render of a short stand-in conversation of the same shape
//     (its leading system or developer message, its last role, which parts its last reply
//     has), kept per options and shape.
//
// Invariants:
//   1. Render returns exactly what the full render (FullRender) returns for the same
//      conversation and options, or nullopt, and the caller then renders in full.
//   2. A template whose llama.cpp handler edits the messages before rendering them (gpt-oss,
//      Ministral 3, LFM2, DeepSeek V3.2/V4, StepFun, the older Gemma 4 templates) never
//      renders in one pass: Create returns nullptr.
//   3. Create returns nullptr too when one pass and the full render disagree on any probe
//      conversation.
//   4. With a generation prompt asked for, a prompt that does not end with the stand-in's
//      generation prompt, or a stand-in without one, is never returned (the full render
//      then gives it: Gemma 4 after tool results, where its handler decides from what the
//      reply said).
//
// Thread safety: Render may be called from any thread at once; the stand-ins' results sit
// behind a mutex. The templates handle passed to Create must outlive the OnePassRender.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "engine/chat_template.h"

struct common_chat_templates;
struct common_chat_template;
struct llama_vocab;

namespace hearth::engine {

// The reference: llama.cpp's common_chat_templates_apply on the conversation.
// Throws what the chat library throws (the template's own errors, bad tool JSON).
RenderedPrompt FullRender(const common_chat_templates* templates, std::span<const ChatMessage> messages,
                          const RenderOptions& options);

class OnePassRender {
 public:
  // nullptr when the template must be rendered in full (invariants 2 and 3).
  static std::unique_ptr<OnePassRender> Create(const common_chat_templates* templates, const llama_vocab* vocab);
  ~OnePassRender();

  // nullopt: render this one in full (a template error, a shape without a usable stand-in,
  // invariant 4). Never throws.
  std::optional<RenderedPrompt> Render(std::span<const ChatMessage> messages, const RenderOptions& options) const;

 private:
  struct Frame;
  OnePassRender(const common_chat_templates* templates, std::unique_ptr<common_chat_template> plain,
                std::unique_ptr<common_chat_template> tool_use, bool add_bos, bool add_eos);
  std::shared_ptr<const Frame> FrameFor(std::span<const ChatMessage> messages, const RenderOptions& options,
                                        const std::string& key) const;

  const common_chat_templates* templates_;
  std::unique_ptr<common_chat_template> plain_;     // llama.cpp's template_default
  std::unique_ptr<common_chat_template> tool_use_;  // its template_tool_use; may be null
  bool add_bos_;
  bool add_eos_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Frame>> frames_;  // guarded by mu_
};

}  // namespace hearth::engine
