// The Anthropic Messages wire format: POST /v1/messages and
// POST /v1/messages/count_tokens, translated to and from the API-neutral structs in
// types.h, as Claude Code and the official SDKs use them.
//
// Pure translation: no engine, no HTTP, no clock. The caller supplies ids (ids.h).
//
// Thread safety: the functions are pure; a StreamEncoder belongs to one stream and is
// used by one thread at a time.
//
// Invariants:
//   1. Nothing here throws. A malformed or unsupported request comes back as an ApiError
//      (400, "invalid_request_error") naming the field: "messages[3].content[1].tool_use_id
//      is required".
//   2. Every returned string is valid UTF-8 (invalid model bytes become U+FFFD).
//   3. Unknown request fields are ignored, as are the known ones hearth has no use for
//      (metadata, service_tier, container, mcp_servers, context_management,
//      thinking signatures).
//   4. cache_control ({"type":"ephemeral"}, optional "ttl" "5m" or "1h"; at most 4 blocks)
//      on tools, system and message blocks becomes a CacheBreakpoint: the end of the
//      message holding the block (for tools and system blocks, message 0). A bad type or
//      ttl is a 400 naming it. Blocks inside tool_result content are not read.
//
// Request mapping worth knowing:
//   - `system` (string or text blocks) becomes one leading "system" message.
//   - A message with role "system" (a mid-conversation system turn, which Claude Code
//     sends) becomes a "system" message in its place; its blocks must be text.
//   - A user message's blocks are split in order: each tool_result becomes its own
//     "tool" message, and each run of text blocks between them one "user" message, so
//     [tool_result A, tool_result B, text] gives tool(A), tool(B), user(text).
//     tool_result is_error is accepted and dropped (templates have no place for it;
//     Claude Code already says so in the text).
//   - An assistant message's blocks collapse into one message: text blocks join into
//     content, thinking blocks into reasoning_content, tool_use blocks into tool_calls
//     (arguments = `input` as compact JSON, keys in the client's order).
//     redacted_thinking and server-tool blocks (server_tool_use, *_tool_result,
//     mcp_tool_use) are dropped.
//   - Tools with a `type` other than "custom" (bash_20250124, web_search_*, ...) are
//     Anthropic-hosted tools and are dropped, not refused.
//   - tool_choice {type: auto|any|tool|none} maps to "auto" | "required" | name | "none";
//     disable_parallel_tool_use maps to parallel_tool_calls = false.
//   - thinking {type: enabled} sets enable_thinking = true (budget_tokens is accepted and
//     not enforced), disabled = false, adaptive leaves it unset.
//   - Refused with 400: image and document blocks ("this model accepts text only").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/parse_result.h"
#include "api/types.h"

namespace hearth::api::anthropic {

// POST /v1/messages. On success: flavor kAnthropic, messages non-empty, max_tokens set.
ParseResult<GenerationRequest> ParseMessagesRequest(std::string_view body);

// POST /v1/messages/count_tokens: the same body, max_tokens not required.
ParseResult<GenerationRequest> ParseCountTokensRequest(std::string_view body);

// "end_turn", "max_tokens", "tool_use" or "stop_sequence" (kCancelled reports
// "end_turn").
const char* StopReasonName(FinishReason reason);

// The whole `message` object of a non-streaming reply. Content blocks come in the order
// thinking, text, tool_use; a tool call whose arguments are not a JSON object gets
// input {} (Anthropic's schema has no place for raw text), and one without an id gets a
// fresh "toolu_" id.
std::string MessageJson(const Completion& completion, const std::string& id,
                        const std::string& model);

// {"input_tokens": n}, the count_tokens reply.
std::string CountTokensJson(int input_tokens);

// {"type":"error","error":{"type","message"}}.
std::string ErrorJson(const ApiError& error);

// Turns a stream of Deltas into Anthropic's server-sent events, each
// "event: <type>\ndata: <json>\n\n".
//
// Content blocks open and close as the kind of output changes (reasoning -> thinking
// block, content -> text block, each tool call -> its own tool_use block), numbered from
// 0 in the order they open; at most one block is open at a time. A thinking block gets a
// signature_delta (signature "") just before its content_block_stop.
//
// REQUIRES: calls in the order Start, Push*, then Finish or Error; Ping at any time.
// REQUIRES: tool call deltas for one index are contiguous (a call is complete before the
// next begins), as llama.cpp's output parsers produce them.
class StreamEncoder {
 public:
  // message_start. `usage` is what is known so far (prompt counts; zeros if not yet).
  std::string Start(const std::string& id, const std::string& model, const Usage& usage);
  // The events for one Delta: block starts and stops as needed, and content_block_delta
  // (thinking_delta, text_delta, input_json_delta).
  std::string Push(const Delta& delta);
  // Closes any open block, then message_delta (stop_reason, stop_sequence, usage) and
  // message_stop. Only completion.finish_reason, stop_sequence and usage are read: the
  // content already went out through Push.
  std::string Finish(const Completion& completion);
  // Closes nothing: an `error` event ends the stream as Anthropic's does.
  std::string Error(const ApiError& error);
  std::string Ping();

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  // Appends the events that close the open block, if any.
  void CloseBlock(std::string* out);
  // Appends content_block_start for `kind`, closing the open block first.
  void OpenBlock(Block kind, const Delta::ToolCallDelta* call, std::string* out);

  Block open_ = Block::kNone;
  int n_blocks_opened_ = 0;             // the open block, if any, is number n - 1
  std::optional<int> open_tool_index_;  // Delta index of the open tool_use block's call
};

}  // namespace hearth::api::anthropic
