#include "server/request_builder.h"

#include <algorithm>
#include <string>
#include <variant>

#include "cache/snapshot_policy.h"

namespace hearth::server {

api::ApiError BadRequest(std::string message, std::string param) {
  return {400, "invalid_request_error", std::move(message), std::move(param)};
}

namespace {

engine::ChatMessage ToEngine(const api::Message& m) {
  engine::ChatMessage out;
  out.role = m.role;
  out.content = m.content;
  out.reasoning_content = m.reasoning_content;
  out.tool_call_id = m.tool_call_id;
  out.tool_name = m.tool_name;
  for (const auto& c : m.tool_calls) out.tool_calls.push_back({c.id, c.name, c.arguments});
  return out;
}

// Many templates (Qwen's among them) accept a system message only at the start, while
// clients send system turns mid-conversation (Claude Code does). When the template refuses
// them, each such turn becomes a user turn holding its text in <system-reminder> tags, in
// place, so that the next request's prompt still shares this one's prefix. Only the first
// message stays a system one: such templates refuse a second even right after it (Codex
// sends two developer messages first). Returns whether any message changed.
bool DemoteLateSystemMessages(std::vector<engine::ChatMessage>* messages) {
  bool changed = false;
  for (size_t i = 1; i < messages->size(); ++i) {
    engine::ChatMessage& m = (*messages)[i];
    if (m.role != "system") continue;
    m.role = "user";
    m.content = "<system-reminder>\n" + m.content + "\n</system-reminder>";
    changed = true;
  }
  return changed;
}

engine::SamplingParams ToEngine(const api::Sampling& s) {
  engine::SamplingParams p;
  if (s.temperature) p.temperature = *s.temperature;
  if (s.top_p) p.top_p = *s.top_p;
  if (s.top_k) p.top_k = *s.top_k;
  if (s.min_p) p.min_p = *s.min_p;
  if (s.seed) p.seed = *s.seed;
  if (s.presence_penalty) p.presence_penalty = *s.presence_penalty;
  if (s.frequency_penalty) p.frequency_penalty = *s.frequency_penalty;
  if (s.repetition_penalty) p.repetition_penalty = *s.repetition_penalty;
  return p;
}

}  // namespace

RequestBuilder::RequestBuilder(const engine::Model& model, const engine::ChatTemplate& chat_template, int n_ctx,
                               std::string cache_namespace, chat::Stabilizer stabilizer, ChatDefaults chat_defaults)
    : model_(model),
      template_(chat_template),
      n_ctx_(n_ctx),
      cache_namespace_(std::move(cache_namespace)),
      stabilizer_(std::move(stabilizer)),
      chat_defaults_(std::move(chat_defaults)) {
  // Learn the template's turn structure from a probe conversation: the generation
  // prompt's first token marks the start of every turn, and the text between that marker
  // and a past assistant turn's content is how history opens an assistant turn.
  const std::string kProbe = "hearth-probe-7f3a";
  std::vector<engine::ChatMessage> probe = {{.role = "user", .content = "a"},
                                            {.role = "assistant", .content = kProbe},
                                            {.role = "user", .content = "b"}};
  auto rendered = template_.Render(probe, {});
  if (!rendered.ok()) return;
  auto gen = model_.Tokenize(rendered->generation_prompt, false, true);
  if (!gen.empty() && model_.TokenPiece(gen[0], true).size() > 1) turn_marker_ = gen[0];
  if (turn_marker_) memo_ = engine::TokenMemo::Create(model_, *turn_marker_);
  const std::string& text = rendered->prompt;
  const size_t at = text.find(kProbe);
  if (!turn_marker_ || at == std::string::npos) return;
  const std::string marker = model_.TokenPiece(*turn_marker_, true);
  const size_t open = text.rfind(marker, at);
  if (open != std::string::npos) assistant_start_ = text.substr(open, at - open);

  // Whether history opens a new turn for an assistant message that follows tool results,
  // or continues the turn that called the tools (Gemma 4: no marker, so the generation
  // prompt after a tool result is not repeated when the conversation goes on).
  const std::string kToolProbe = "hearth-tool-probe-2c9e";
  std::vector<engine::ChatMessage> tool_probe = {
      {.role = "user", .content = "a"},
      {.role = "assistant", .content = "c", .tool_calls = {{.id = "call-1", .name = "probe", .arguments = "{}"}}},
      {.role = "tool", .content = kToolProbe, .tool_call_id = "call-1", .tool_name = "probe"},
      {.role = "assistant", .content = kProbe},
      {.role = "user", .content = "b"}};
  auto with_tool = template_.Render(tool_probe, {});
  if (!with_tool.ok()) return;
  const size_t tool_at = with_tool->prompt.find(kToolProbe);
  const size_t reply_at = with_tool->prompt.find(kProbe, tool_at == std::string::npos ? 0 : tool_at);
  if (tool_at == std::string::npos || reply_at == std::string::npos) return;
  const size_t reply_open = with_tool->prompt.rfind(marker, reply_at);
  tool_reply_continues_turn_ = reply_open == std::string::npos || reply_open < tool_at;
}

std::vector<int32_t> RequestBuilder::MessageEnds(const std::vector<engine::Token>& tokens) const {
  std::vector<int32_t> out;
  if (!turn_marker_) return out;
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] == *turn_marker_) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

std::vector<int32_t> RequestBuilder::SnapshotPositions(const std::vector<engine::Token>& prompt,
                                                       const std::string& generation_prompt,
                                                       bool after_tool_results) const {
  // After tool results in a template whose history continues the calling turn there,
  // the next request drops the whole generation prompt and resumes from the last end.
  const std::vector<int32_t> ends = MessageEnds(prompt);
  return cache::SnapshotPolicy::RequestPositions({.n_tokens = static_cast<int32_t>(prompt.size()),
                                                  .message_ends = ends,
                                                  .generation_start = GenerationStart(prompt, generation_prompt),
                                                  .resumes_at_last_end = after_tool_results && tool_reply_continues_turn_});
}

int32_t RequestBuilder::GenerationStart(const std::vector<engine::Token>& prompt,
                                       const std::string& generation_prompt) const {
  const auto n = static_cast<int32_t>(prompt.size());
  // The generation prompt minus what a re-rendered assistant turn does not repeat.
  size_t common = 0;
  while (common < generation_prompt.size() && common < assistant_start_.size() &&
         generation_prompt[common] == assistant_start_[common]) {
    ++common;
  }
  if (common > 0 && common < generation_prompt.size()) {
    const auto n_suffix = static_cast<int32_t>(model_.Tokenize(generation_prompt.substr(common), false, true).size());
    if (n_suffix > 0 && n_suffix < n) return n - n_suffix;
  }
  return n;
}

StatusOr<engine::RenderedPrompt> RequestBuilder::RenderChat(const api::GenerationRequest& request,
                                                            bool add_generation_prompt, size_t n_open) const {
  std::vector<api::Message> stable = request.messages;
  stabilizer_.Apply(stable);
  std::vector<engine::ChatMessage> messages;
  for (const auto& m : stable) messages.push_back(ToEngine(m));
  engine::RenderOptions ro;
  ro.add_generation_prompt = add_generation_prompt;
  ro.reasoning_format = chat_defaults_.reasoning_format;
  ro.template_kwargs = chat_defaults_.template_kwargs;
  if (auto it = ro.template_kwargs.find("enable_thinking"); it != ro.template_kwargs.end()) {
    ro.enable_thinking = it->second != "false";
    ro.template_kwargs.erase(it);
  }
  if (request.enable_thinking) ro.enable_thinking = *request.enable_thinking;
  for (const auto& t : request.tools) ro.tools.push_back({t.name, t.description, t.parameters});
  if (!request.tools.empty()) {
    ro.tool_choice = request.tool_choice;
    // A named function is not something the template can force; offer the tools.
    if (ro.tool_choice != "auto" && ro.tool_choice != "none" && ro.tool_choice != "required") ro.tool_choice = "required";
  }
  ro.parallel_tool_calls = request.parallel_tool_calls;
  for (const auto& [key, value] : request.template_kwargs) ro.template_kwargs[key] = value;
  auto render = [&] {
    return n_open > 0 ? template_.RenderAndRemember(messages, ro, n_open) : template_.Render(messages, ro);
  };
  auto rendered = render();
  if (!rendered.ok() && DemoteLateSystemMessages(&messages)) rendered = render();
  return rendered;
}

std::optional<std::string> RequestBuilder::RenderText(const api::GenerationRequest& request) const {
  if (request.prompt) return *request.prompt;
  auto rendered = RenderChat(request);
  if (!rendered.ok()) return std::nullopt;
  return std::move(rendered->prompt);
}

std::variant<BuildResult, api::ApiError> RequestBuilder::Render(const api::GenerationRequest& request,
                                                                size_t n_open) const {
  BuildResult out;
  if (request.prompt) {
    out.prompt_text = *request.prompt;
    out.task.prompt = model_.Tokenize(out.prompt_text, /*add_bos=*/true, /*parse_special=*/false);
    const auto n = static_cast<int32_t>(out.task.prompt.size());
    out.task.snapshot_positions = cache::SnapshotPolicy::RequestPositions({.n_tokens = n, .generation_start = n});
    return out;
  }
  auto rendered = RenderChat(request, /*add_generation_prompt=*/true, n_open);
  if (!rendered.ok()) return BadRequest(rendered.status().message(), "messages");
  out.prompt_text = rendered->prompt;
  // The rendered prompt carries its own control tokens (and BOS where the template wants it).
  out.task.prompt = TokenizeRendered(out.prompt_text);
  out.task.output_format = rendered->output_format;
  out.task.stop = rendered->additional_stops;
  const bool after_tool_results = !request.messages.empty() && request.messages.back().role == "tool";
  out.task.snapshot_positions = SnapshotPositions(out.task.prompt, rendered->generation_prompt, after_tool_results);
  out.task.generation_start = GenerationStart(out.task.prompt, rendered->generation_prompt);
  return out;
}

// Where the spans the stabilizer appended to the last message begin, in prompt tokens:
// the common prefix of the prompt and the tokens of its text up to them. nullopt when
// nothing was moved (or the template changed the text beyond recognition).
std::optional<int32_t> RequestBuilder::MovedSpansStart(const api::GenerationRequest& request,
                                                       const BuildResult& built) const {
  if (request.prompt || request.messages.size() < 2 || stabilizer_.empty()) return std::nullopt;
  std::vector<api::Message> stable = request.messages;
  if (stabilizer_.Apply(stable) == 0) return std::nullopt;
  const std::string& before = request.messages.back().content;
  const std::string& after = stable.back().content;
  if (after.size() <= before.size() || !after.starts_with(before)) return std::nullopt;  // kDrop
  const size_t at = built.prompt_text.rfind(after.substr(before.size()));
  if (at == std::string::npos) return std::nullopt;
  const auto head = TokenizeRendered(built.prompt_text.substr(0, at));
  const auto& prompt = built.task.prompt;
  const size_t n = engine::CommonPrefix(head, prompt);
  if (n == 0 || static_cast<int32_t>(n) >= built.task.generation_start) return std::nullopt;
  return static_cast<int32_t>(n);
}

void RequestBuilder::MapCacheHints(const api::GenerationRequest& request, GenerationTask* task) const {
  const api::CacheHints& hints = request.cache_hints;
  task->cache_conversation = hints.key;
  if (hints.extended) task->newest_hold_seconds = 24 * 3600;
  if (request.prompt || hints.breakpoints.empty()) return;
  const auto& snaps = task->snapshot_positions;
  // With one turn per message (the common case) message i ends at the (i+1)-th turn
  // marker; a template that merges or adds turns (Qwen's joins tool results, and opens a
  // system turn for tools) gets the messages through i rendered and compared instead.
  const std::vector<int32_t> ends = MessageEnds(task->prompt);
  const bool one_turn_each = ends.size() == request.messages.size();
  for (const api::CacheBreakpoint& bp : hints.breakpoints) {
    if (bp.message < 0 || static_cast<size_t>(bp.message) >= request.messages.size()) continue;
    int32_t end = 0;
    if (one_turn_each) {
      end = ends[static_cast<size_t>(bp.message)];
    } else {
      api::GenerationRequest prefix = request;
      prefix.messages.resize(static_cast<size_t>(bp.message) + 1);
      auto rendered = RenderChat(prefix, /*add_generation_prompt=*/false);
      if (!rendered.ok()) continue;
      end = static_cast<int32_t>(engine::CommonPrefix(TokenizeRendered(rendered->prompt), task->prompt));
    }
    // The last message's end has no snapshot of its own: the generation start, a few
    // tokens on, serves it (SnapshotPositions).
    end = cache::SnapshotPolicy::ServingPosition(end, task->generation_start);
    auto it = std::upper_bound(snaps.begin(), snaps.end(), end);
    if (it == snaps.begin()) continue;
    task->cache_breakpoints.push_back({*std::prev(it), bp.ttl_seconds});
  }
}

std::variant<BuildResult, api::ApiError> RequestBuilder::Build(const api::GenerationRequest& request) const {
  auto rendered = Render(request);
  if (auto* err = std::get_if<api::ApiError>(&rendered)) return *err;
  BuildResult out = std::move(std::get<BuildResult>(rendered));
  if (auto at = MovedSpansStart(request, out)) {
    out.task.moved_spans_start = *at;
    cache::SnapshotPolicy::AddPosition(out.task.snapshot_positions, *at);
  }
  const int n_prompt = static_cast<int>(out.task.prompt.size());
  if (n_prompt == 0) return BadRequest("the prompt is empty", "prompt");
  if (n_prompt >= n_ctx_) {
    return BadRequest("the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                          std::to_string(n_ctx_) + "; shorten the conversation or start the server with a larger --ctx-size",
                      request.prompt ? "prompt" : "messages");
  }
  const int room = n_ctx_ - n_prompt;
  if (request.max_tokens) {
    // Anthropic clients send a model-wide default (Claude Code: 32000) rather than a
    // per-request wish, so there it is a cap; OpenAI callers get the error.
    if (*request.max_tokens > room && request.flavor != api::Flavor::kAnthropic) {
      const std::string field = request.flavor == api::Flavor::kOpenAIResponses ? "max_output_tokens" : "max_tokens";
      return BadRequest(field + " is " + std::to_string(*request.max_tokens) + " but the prompt has " +
                            std::to_string(n_prompt) + " tokens and the context holds " + std::to_string(n_ctx_) +
                            ", leaving room for " + std::to_string(room),
                        field);
    }
    out.task.max_tokens = std::min(*request.max_tokens, room);
  } else {
    // The server's default is no wish of the client's: it never makes a request fail.
    out.task.max_tokens = chat_defaults_.max_tokens ? std::min(*chat_defaults_.max_tokens, room) : room;
  }
  out.task.cache_namespace = CacheNamespace(request.cache_salt);
  MapCacheHints(request, &out.task);
  out.task.sampling = ToEngine(request.sampling);
  if (Status s = out.task.sampling.Validate(); !s.ok()) return BadRequest(s.message());
  for (const auto& s : request.stop) out.task.stop.push_back(s);
  return out;
}

}  // namespace hearth::server
