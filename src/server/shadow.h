// Shadow prefill: warm-ahead while the reply is still being generated.
//
// Warm-ahead (warm_ahead.h) prepares the next request's rendering of a reply after it
// ends, while the server is idle. An agent sending tool results, or any client replying
// at once, leaves no idle time, and the next prompt would prefill the whole re-rendered
// reply. So while a chat reply is generated, a second sequence, forked at the start of
// generation, is fed the reply as the next request will carry it (re-rendered by the
// template: think scaffold dropped, content trimmed), eight tokens at a time in the same
// batch as a decode step where that costs little (ShadowFeed::kWithDecode, a GPU). When
// the reply ends, the rest (the last words and the closing tokens; with
// ShadowFeed::kAfterReply, the default on a CPU, all of it up to 64 tokens) goes in one
// decode.
//
// Who does what:
//   - the engine loop starts the shadow once the request's first token is out, posts the
//     partial reply whenever no render is in flight, feeds the newest target's tokens,
//     and when the reply ends gives the shadow to the cache if the final reply still
//     begins with what the target was rendered from (else it is released: no state
//     nobody can reach);
//   - the warm-ahead worker renders targets (PlanShadow) and publishes them here.
//
// Threads: the mailbox is shared by the loop and the worker; every field is guarded by mu.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "engine/types.h"

namespace hearth::server {

// How much of a growing text more text cannot tokenize differently. BPE pre-tokenizers
// (GPT-4 and Qwen style) split before whitespace, around single digits, and between runs
// of letters and of punctuation, so only the tail can still change: a trailing run of
// letters (with the one character that may open it, " word" or "(word") or of
// punctuation (which also takes following newlines). A word followed by whitespace is
// complete. Bytes of multi-byte characters count as letters, which errs toward cutting
// more; callers also probe the cut (see PlanShadow).
inline size_t StableTextLength(std::string_view text) {
  auto space = [](unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  auto letter = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; };
  auto digit = [](unsigned char c) { return c >= '0' && c <= '9'; };
  auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t n = text.size();
  bool spaced = false;
  while (n > 0 && space(at(n - 1))) {
    --n;
    spaced = true;
  }
  if (n == 0 || digit(at(n - 1))) return n;
  if (letter(at(n - 1))) {
    if (spaced) return n;
    while (n > 0 && letter(at(n - 1))) --n;
    if (n > 0 && at(n - 1) != '\n' && at(n - 1) != '\r' && !digit(at(n - 1))) --n;  // its opener
  } else {
    while (n > 0 && !space(at(n - 1)) && !letter(at(n - 1)) && !digit(at(n - 1))) --n;
    if (n > 0 && at(n - 1) == ' ') --n;
  }
  while (n > 0 && space(at(n - 1))) --n;
  return n;
}

// A rendering of the next request up to a point that more generated text cannot change.
struct ShadowTarget {
  std::vector<engine::Token> tokens;  // from the prompt's first token
  // The ends of its messages (before each turn marker), ascending: the shadow's decodes
  // end there and it keeps states there, so a later turn's shadow that renders the same
  // messages again (an agent's tool loop re-rendered as it will be once a user message
  // follows, one call and result longer each turn) starts over from the last of them.
  std::vector<int32_t> message_ends;
  // What it was rendered from: the final reply must begin with these.
  std::string basis_content;
  std::string basis_reasoning;
  // Whether the next request carries the reasoning (else the template drops it, and the
  // final reply's reasoning does not matter).
  bool reasoning_rendered = true;
  // How the tokens go on once the reply is complete (`splice`; see FinalShadowTokens):
  // tokens[0, content_start) come before the reply's content, which the template renders
  // starting with `content_rendered` (basis_content, leading whitespace trimmed; empty
  // while no content came) and follows with `closing` (end of turn, the next message's
  // header).
  bool splice = false;
  size_t content_start = 0;
  std::string content_rendered;
  std::string closing;
};

// The next request's tokens up to where the next message's own content starts, once the
// reply is complete as `reply`, continued from `target` without rendering again: the
// content after the basis is tokenized in place with the closing text. A reply shorter
// than the basis (cut off, its client read less than the target was rendered from) is
// the basis cut there, closed the same way. nullopt when the target cannot say (no
// splice known, tool calls, rendered reasoning changed) or the content is something
// templates rework: trailing whitespace (trimmed), markup ('<') after the basis or cut
// open, or not valid UTF-8 (the client gets U+FFFD instead).
// Costs two tokenizations of the reply's content; the engine loop calls it when a reply
// ends, so that the shadow also holds the reply's last word and the end of its turn.
struct FinalShadow {
  std::vector<engine::Token> tokens;
  size_t content_end = 0;  // tokens[0, content_end) end with the reply's content; 0: unknown
};
std::optional<FinalShadow> FinalShadowTokens(const ShadowTarget& target, const api::Completion& reply,
                                             const std::function<std::vector<engine::Token>(const std::string&)>& tokenize);

class ShadowPlanner;  // warm_ahead.h

struct ShadowMailbox {
  // The worker's planning state for this request; only the worker touches it, and only
  // while busy (a job is in flight).
  std::shared_ptr<ShadowPlanner> planner;

  std::mutex mu;
  std::condition_variable cv;
  ShadowTarget target;    // guarded by mu; the loop moves it out when it takes a new version
  uint64_t version = 0;   // guarded by mu; bumped with every published target
  bool busy = false;      // guarded by mu; a render is in flight

  void Publish(ShadowTarget t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      target = std::move(t);
      ++version;
      busy = false;
    }
    cv.notify_all();
  }
  // The render gave nothing new (or was dropped): ready for the next one.
  void Skip() {
    {
      std::lock_guard<std::mutex> lock(mu);
      busy = false;
    }
    cv.notify_all();
  }
};

}  // namespace hearth::server
