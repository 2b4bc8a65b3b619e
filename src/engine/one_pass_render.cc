#include "engine/one_pass_render.h"

#include <ctime>
#include <exception>
#include <iomanip>
#include <sstream>
#include <vector>

#include "chat-auto-parser.h"
#include "chat.h"
#include "common.h"
#include "llama.h"

namespace hearth::engine {

// What a stand-in's full render gives that does not depend on what the messages say.
struct OnePassRender::Frame {
  bool usable = false;      // false: the stand-in did not render, or gave nothing to check by
  RenderedPrompt rendered;  // everything but the prompt
};

namespace {

using json = common_json;

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

std::vector<common_chat_tool> ToCommon(const std::vector<ChatTool>& tools) {
  std::vector<common_chat_tool> out;
  for (const auto& t : tools) out.push_back({t.name, t.description, t.parameters});
  return out;
}

common_reasoning_format ReasoningFormat(const RenderOptions& options) {
  if (options.reasoning_format == "none") return COMMON_REASONING_FORMAT_NONE;
  if (options.reasoning_format == "deepseek-legacy") return COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
  return COMMON_REASONING_FORMAT_DEEPSEEK;
}

bool IsSystemRole(const std::string& role) { return role == "system" || role == "developer"; }

// Markers of the templates whose handler in llama.cpp's common_chat_try_specialized_template
// (or common_chat_templates_apply_jinja itself) renders messages other than the ones it was
// given: gpt-oss moves reasoning into "thinking", Ministral 3, LFM2 and DeepSeek V3.2/V4
// rewrite messages, StepFun trims every content, older Gemma 4 templates fold tool
// results into the assistant message.
bool EditsMessages(const std::string& src) {
  auto has = [&](const char* s) { return src.find(s) != std::string::npos; };
  return has("<|channel|>") || has("[SYSTEM_PROMPT]") || has("<|tool_list_start|>") || has("List of tools: [") ||
         has("dsml_token") || has("You have access to the following functions in JSONSchema format") ||
         (has("'<|tool_call>call:'") && !has("{#- OpenAI Chat Completions:"));
}

std::string LocalTime(std::time_t t, const char* format) {
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream s;
  s << std::put_time(&tm, format);
  return s.str();
}

// The two dates llama.cpp's chat library hands every template.
struct DateContext {
  std::string datetime;
  std::string date_string;
};

DateContext Today() {
  std::time_t now = std::time(nullptr);
  return {LocalTime(now, "%b %d %Y"), LocalTime(now, "%d %b %Y")};
}

// The conversation as common_chat_templates_apply_jinja hands it to the template. Throws
// where it would (tool arguments that are not JSON, kwargs that are not JSON).
autoparser::generation_params Prepare(const common_chat_template& tmpl, bool add_bos, bool add_eos,
                                      std::span<const ChatMessage> messages, const RenderOptions& options,
                                      const DateContext& date) {
  const jinja::caps caps = tmpl.original_caps();
  json msgs = json::array();
  for (const auto& m : messages) msgs.push_back(ToCommon(m).to_json_oaicompat(/*concat_typed_text=*/false));
  if (!caps.supports_string_content && caps.supports_typed_content) {
    for (auto& m : msgs) {
      if (m.contains("content") && m.at("content").is_string()) {
        std::string text = m.at("content");
        m["content"] = json::array({json{{"type", "text"}, {"text", text}}});
      }
    }
  }
  for (auto& m : msgs) {
    if (m.contains("role") && m.at("role") == "developer") m["role"] = "system";
  }
  if (!caps.supports_system_role && !msgs.empty() && msgs.front().at("role") == "system") {
    // Merged into the next message, or dropped when it is the only one.
    if (msgs.size() > 1) {
      std::string merged = msgs.at(size_t{0}).at("content").get<std::string>() + "\n" +
                           msgs.at(size_t{1}).at("content").get<std::string>();
      msgs.at(size_t{1})["content"] = merged;
    }
    msgs.erase(size_t{0});
  }
  // common's requires_non_null_content has nothing to do here: to_json_oaicompat always
  // writes a content.
  if (caps.supports_object_arguments) {
    for (auto& m : msgs) {
      if (!m.contains("tool_calls")) continue;
      for (auto& call : m["tool_calls"]) {
        if (!call.contains("function") || !call["function"].contains("arguments")) continue;
        json& args = call["function"]["arguments"];
        if (args.is_string()) args = json::parse(args.get<std::string>());
      }
    }
  }
  autoparser::generation_params p;
  p.messages = std::move(msgs);
  p.tools = common_chat_tools_to_json_oaicompat(ToCommon(options.tools));
  p.enable_thinking = options.enable_thinking;
  p.add_generation_prompt = options.add_generation_prompt;
  p.add_bos = add_bos;
  p.add_eos = add_eos;
  p.extra_context = json::object();
  p.extra_context["datetime"] = date.datetime;
  p.extra_context["date_string"] = date.date_string;
  for (const auto& [k, v] : options.template_kwargs) p.extra_context[k] = json::parse(v);
  return p;
}

// The reply a conversation ends with, or that its trailing tool results answer: what a
// template's generation prompt may depend on besides the last role (Gemma 4's handler
// opens a new model turn after tool results only when the reply said something first).
const ChatMessage* LastReply(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "tool") continue;
    return messages[i].role == "assistant" ? &messages[i] : nullptr;
  }
  return nullptr;
}

std::string ReplyShape(const ChatMessage* reply) {
  if (reply == nullptr) return "";
  std::string shape = "reply";
  if (!reply->content.empty()) shape += "+content";
  if (!reply->reasoning_content.empty()) shape += "+reasoning";
  if (!reply->tool_calls.empty()) shape += "+calls";
  return shape;
}

// A short conversation of the same shape: the same leading system or developer role, the
// same last role, and a last reply with the same parts.
std::optional<std::vector<ChatMessage>> StandIn(std::span<const ChatMessage> messages,
                                                const RenderOptions& options) {
  if (messages.empty()) return std::nullopt;
  const ChatMessage& last = messages.back();
  std::vector<ChatMessage> out;
  if (messages.size() == 1) {
    out.push_back({.role = last.role, .content = "x"});
    return out;
  }
  if (IsSystemRole(messages.front().role)) out.push_back({.role = messages.front().role, .content = "s"});
  const std::string tool = options.tools.empty() ? "f" : options.tools.front().name;
  const ChatToolCall call{.id = "call_0", .name = tool, .arguments = "{}"};
  const ChatMessage* reply = LastReply(messages);
  ChatMessage stand_in_reply{.role = "assistant"};
  if (reply != nullptr) {
    if (!reply->content.empty()) stand_in_reply.content = "a";
    if (!reply->reasoning_content.empty()) stand_in_reply.reasoning_content = "r";
    if (!reply->tool_calls.empty()) stand_in_reply.tool_calls = {call};
  }
  if (last.role == "user") {
    out.push_back({.role = "user", .content = "u"});
  } else if (last.role == "assistant") {
    out.push_back({.role = "user", .content = "u"});
    out.push_back(std::move(stand_in_reply));
  } else if (last.role == "tool" && reply != nullptr && !reply->tool_calls.empty()) {
    out.push_back({.role = "user", .content = "u"});
    out.push_back(std::move(stand_in_reply));
    out.push_back({.role = "tool", .content = "r", .tool_call_id = call.id, .tool_name = tool});
  } else {
    return std::nullopt;
  }
  return out;
}

// Everything a frame depends on: the shape, the options, the day.
std::string FrameKey(std::span<const ChatMessage> messages, const RenderOptions& options, const DateContext& date) {
  constexpr char kField = '\x1f';
  std::string key = date.datetime;
  key += kField;
  if (messages.size() > 1 && IsSystemRole(messages.front().role)) key += messages.front().role;
  key += kField + messages.back().role + kField + ReplyShape(LastReply(messages)) + kField;
  key += options.add_generation_prompt ? 'g' : '-';
  key += options.enable_thinking ? 't' : '-';
  key += options.parallel_tool_calls ? 'p' : '-';
  key += kField + options.tool_choice + kField + options.reasoning_format;
  for (const auto& [k, v] : options.template_kwargs) key += kField + k + '=' + v;
  for (const auto& t : options.tools) key += kField + t.name + kField + t.description + kField + t.parameters;
  return key;
}

// Conversations that exercise what the preparation touches: a system and a developer
// message, reasoning, tool calls and their results, a last assistant message, no
// generation prompt.
struct Probe {
  std::vector<ChatMessage> messages;
  RenderOptions options;
};

std::vector<Probe> Probes() {
  const ChatToolCall call{.id = "call_1", .name = "get_weather", .arguments = R"({"city":"Paris","days":2})"};
  RenderOptions tools;
  tools.tools = {{.name = "get_weather",
                  .description = "The weather in a city.",
                  .parameters = R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},)"
                                R"("required":["city"]})"}};
  RenderOptions no_thinking = tools;
  no_thinking.enable_thinking = false;
  RenderOptions no_generation_prompt;
  no_generation_prompt.add_generation_prompt = false;
  return {
      {{{.role = "user", .content = "Hello"}}, {}},
      {{{.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Hi"},
        {.role = "assistant", .content = "Hello!", .reasoning_content = "A greeting."},
        {.role = "user", .content = "What now?"}},
       tools},
      {{{.role = "developer", .content = "Use the tools."},
        {.role = "user", .content = "Weather in Paris?"},
        {.role = "assistant", .reasoning_content = "A tool knows.", .tool_calls = {call}},
        {.role = "tool", .content = R"({"temp":21})", .tool_call_id = "call_1", .tool_name = "get_weather"}},
       no_thinking},
      {{{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}}, no_generation_prompt},
  };
}

}  // namespace

RenderedPrompt FullRender(const common_chat_templates* templates, std::span<const ChatMessage> messages,
                          const RenderOptions& options) {
  common_chat_templates_inputs in;
  for (const auto& m : messages) in.messages.push_back(ToCommon(m));
  in.add_generation_prompt = options.add_generation_prompt;
  in.enable_thinking = options.enable_thinking;
  in.use_jinja = true;
  in.reasoning_format = ReasoningFormat(options);
  in.parallel_tool_calls = options.parallel_tool_calls;
  in.chat_template_kwargs = options.template_kwargs;
  in.tools = ToCommon(options.tools);
  in.tool_choice = common_chat_tool_choice_parse_oaicompat(options.tool_choice);
  common_chat_params p = common_chat_templates_apply(templates, in);
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
}

std::unique_ptr<OnePassRender> OnePassRender::Create(const common_chat_templates* templates,
                                                     const llama_vocab* vocab) {
  try {
    const std::string plain_src = common_chat_templates_source(templates, "");
    const std::string tool_use_src = common_chat_templates_source(templates, "tool_use");
    if (EditsMessages(plain_src) || EditsMessages(tool_use_src)) return nullptr;
    // The same BOS and EOS texts common_chat_templates_init gives its templates.
    auto piece = [&](llama_token t) {
      return t == LLAMA_TOKEN_NULL ? std::string() : common_token_to_piece(vocab, t, true);
    };
    const std::string bos = piece(llama_vocab_bos(vocab));
    const std::string eos = piece(llama_vocab_eos(vocab));
    auto plain = std::make_unique<common_chat_template>(plain_src, bos, eos);
    auto tool_use = tool_use_src.empty() ? nullptr : std::make_unique<common_chat_template>(tool_use_src, bos, eos);
    std::unique_ptr<OnePassRender> r(new OnePassRender(templates, std::move(plain), std::move(tool_use),
                                                       llama_vocab_get_add_bos(vocab), llama_vocab_get_add_eos(vocab)));
    for (const Probe& probe : Probes()) {
      std::optional<RenderedPrompt> full;
      try {
        full = FullRender(templates, probe.messages, probe.options);
      } catch (const std::exception&) {
      }
      std::optional<RenderedPrompt> once = r->Render(probe.messages, probe.options);
      // Where one pass gives nothing the full render is used, which agrees by itself.
      if (once && (!full || *full != *once)) return nullptr;
    }
    return r;
  } catch (const std::exception&) {
    return nullptr;
  }
}

OnePassRender::OnePassRender(const common_chat_templates* templates, std::unique_ptr<common_chat_template> plain,
                             std::unique_ptr<common_chat_template> tool_use, bool add_bos, bool add_eos)
    : templates_(templates),
      plain_(std::move(plain)),
      tool_use_(std::move(tool_use)),
      add_bos_(add_bos),
      add_eos_(add_eos) {}

OnePassRender::~OnePassRender() = default;

std::shared_ptr<const OnePassRender::Frame> OnePassRender::FrameFor(std::span<const ChatMessage> messages,
                                                                    const RenderOptions& options,
                                                                    const std::string& key) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = frames_.find(key); it != frames_.end()) return it->second;
  }
  auto frame = std::make_shared<Frame>();
  if (auto stand_in = StandIn(messages, options)) {
    try {
      frame->rendered = FullRender(templates_, *stand_in, options);
      frame->rendered.prompt.clear();
      // Invariant 4: a stand-in without a generation prompt leaves nothing to check the
      // prompt against (Gemma 4's handler, for one, appends one itself depending on what
      // the reply said), so its shape renders in full without a wasted pass first.
      frame->usable = !options.add_generation_prompt || !frame->rendered.generation_prompt.empty();
    } catch (const std::exception&) {
    }
  }
  // Kept for as long as the day and the option sets in use last; a server sees few.
  constexpr size_t kMaxFrames = 64;
  std::lock_guard<std::mutex> lock(mu_);
  if (frames_.size() >= kMaxFrames) frames_.clear();
  frames_.emplace(key, frame);
  return frame;
}

std::optional<RenderedPrompt> OnePassRender::Render(std::span<const ChatMessage> messages,
                                                    const RenderOptions& options) const {
  if (messages.empty()) return std::nullopt;
  try {
    const DateContext date = Today();
    std::shared_ptr<const Frame> frame = FrameFor(messages, options, FrameKey(messages, options, date));
    if (!frame->usable) return std::nullopt;
    const common_chat_template& tmpl = !options.tools.empty() && tool_use_ ? *tool_use_ : *plain_;
    std::string prompt =
        common_chat_template_direct_apply(tmpl, Prepare(tmpl, add_bos_, add_eos_, messages, options, date));
    if (options.add_generation_prompt && !prompt.ends_with(frame->rendered.generation_prompt)) return std::nullopt;
    RenderedPrompt out = frame->rendered;
    out.prompt = std::move(prompt);
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace hearth::engine
