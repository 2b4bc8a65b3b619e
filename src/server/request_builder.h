// Turns an API-neutral GenerationRequest into a GenerationTask for the engine loop:
// renders chat messages with the model's template, tokenizes, maps sampling settings,
// and checks the result against the context size.
//
// Thread safety: BuildTask is const and may run on any HTTP thread at once (the Model
// and ChatTemplate it reads are immutable).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/types.h"
#include "chat/stabilizer.h"
#include "engine/chat_template.h"
#include "engine/model.h"
#include "engine/token_memo.h"
#include "server/task.h"

namespace hearth::server {

struct BuildResult {
  GenerationTask task;
  std::string prompt_text;  // the rendered prompt, for /apply-template and logs
};

// Server-wide request settings (`hearth serve --chat-template-kwargs`, --reasoning-format,
// -n).
struct ChatDefaults {
  // Template variables for every request, values as JSON text; a request's own win.
  // "enable_thinking" sets the default of GenerationRequest::enable_thinking.
  std::map<std::string, std::string> template_kwargs;
  std::string reasoning_format = "auto";  // engine::RenderOptions::reasoning_format
  // -n/--n-predict: most tokens generated for a request that sets no limit of its own (as
  // llama-server, a request's max_tokens wins, above it or below); nullopt: until a stop,
  // or the context is full. REQUIRES: positive.
  std::optional<int> max_tokens;
};

class RequestBuilder {
 public:
  // `model` and `chat_template` must outlive the builder. `n_ctx`: most positions one
  // sequence may use. `cache_namespace`: the model's cache namespace (requests add their
  // cache_salt to it).
  RequestBuilder(const engine::Model& model, const engine::ChatTemplate& chat_template, int n_ctx,
                 std::string cache_namespace, chat::Stabilizer stabilizer = {}, ChatDefaults chat_defaults = {});

  // A template that refuses system messages after the first turn gets them as user turns
  // wrapped in <system-reminder> tags instead (clients such as Claude Code send them).
  // Errors (as API errors, 400 unless noted): the template rejects the conversation; the
  // prompt does not fit the context, or prompt + max_tokens does not (both with the
  // numbers); sampling values out of range.
  std::variant<BuildResult, api::ApiError> Build(const api::GenerationRequest& request) const;

  // Only renders and tokenizes (count_tokens, /apply-template, /tokenize). `n_open`: the
  // last n_open messages hold a placeholder that the conversation's next request fills
  // with its own messages' contents; the rendering is remembered for that request
  // (engine::ChatTemplate::RenderAndRemember).
  std::variant<BuildResult, api::ApiError> Render(const api::GenerationRequest& request, size_t n_open = 0) const;
  // Only renders a chat request's prompt text (stabilized); nullopt when the template
  // rejects it. TokenizeRendered tokenizes such text exactly as Render does.
  std::optional<std::string> RenderText(const api::GenerationRequest& request) const;
  // Messages seen before come from memory (engine/token_memo.h).
  std::vector<engine::Token> TokenizeRendered(const std::string& text) const {
    return memo_ ? memo_->Tokenize(text) : model_.Tokenize(text, /*add_bos=*/false, /*parse_special=*/true);
  }

  // Renders spliced into a remembered one (engine::ChatTemplate::n_spliced).
  int64_t n_spliced() const { return static_cast<int64_t>(template_.n_spliced()); }

  // The cache namespace of requests carrying `cache_salt`.
  std::string CacheNamespace(const std::string& cache_salt) const { return cache_namespace_ + "|" + cache_salt; }

  // Where later requests can arrive in `prompt`, ascending: before every turn-start
  // marker (the end of each message) but the generation prompt's own, the start of the
  // generation prompt without the part that re-rendered history drops (e.g.
  // "<think>\n"), and the prompt's end.
  std::optional<int32_t> MovedSpansStart(const api::GenerationRequest& request, const BuildResult& built) const;
  // Positions before every turn-start marker in `tokens` (the end of each message but
  // the last), ascending.
  std::vector<int32_t> MessageEnds(const std::vector<engine::Token>& tokens) const;
  // `after_tool_results`: the last message is a tool result. cache::SnapshotPolicy
  // decides which positions these are (RequestPositions).
  std::vector<int32_t> SnapshotPositions(const std::vector<engine::Token>& prompt,
                                         const std::string& generation_prompt, bool after_tool_results) const;

 private:
  StatusOr<engine::RenderedPrompt> RenderChat(const api::GenerationRequest& request,
                                              bool add_generation_prompt = true, size_t n_open = 0) const;
  // The clients' cache hints as task fields: each breakpoint at the deepest snapshot
  // position within its message's end (the last message's: the generation start); a
  // breakpoint that lands before every snapshot, or whose messages the template will not
  // render alone, is dropped.
  void MapCacheHints(const api::GenerationRequest& request, GenerationTask* task) const;
  // Where generation starts as re-rendered history sees it: the prompt's end minus the
  // generation prompt's suffix that a past assistant turn does not repeat.
  int32_t GenerationStart(const std::vector<engine::Token>& prompt, const std::string& generation_prompt) const;

  const engine::Model& model_;
  const engine::ChatTemplate& template_;
  int n_ctx_;
  std::string cache_namespace_;
  std::optional<engine::Token> turn_marker_;  // e.g. <|im_start|>
  std::string assistant_start_;               // an assistant turn's opening as history renders it
  bool tool_reply_continues_turn_ = false;    // history opens no turn for a reply to tool results
  std::shared_ptr<const engine::TokenMemo> memo_;  // null when the marker is no safe split point
  chat::Stabilizer stabilizer_;
  ChatDefaults chat_defaults_;
};

// 400 invalid_request_error with `message`.
api::ApiError BadRequest(std::string message, std::string param = "");

}  // namespace hearth::server
