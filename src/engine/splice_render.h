// SpliceRender: the next request's prompt from a rendering made before it came, with only
// its new messages' contents put in. Private to engine/ (ChatTemplate is the public face).
//
// A follow-up carries the whole conversation again, and rendering it costs time linear in
// its messages (about 0.1-0.2 ms each through llama.cpp's Jinja runtime on a CPU: 15-30 ms
// at 120 messages), though all that changed is the last message or the tool results. When a
// reply ends, warm-ahead renders the conversation as the next request will carry it, the
// new messages holding a placeholder (warm_ahead.h). Remember keeps that rendering cut at
// the placeholders; when the request comes with the same messages and other contents in
// just those places, Render puts the contents in the cuts instead of rendering it all.
//
// What the template makes of a content is read off a rendering of the conversation's last
// turn (the "stand-in": the leading system message, the messages from the last user
// message on, and the new ones): rendered once with the placeholders at Remember, and once
// with the real contents at Render. That rendering must be the placeholder one with the
// cuts in the same places, only what lies between them changed; what lies there is what
// goes into the whole rendering's cuts. A template that trims or escapes a content thus
// splices as well; one whose output elsewhere depends on the content (a user message that
// is a tool response to Qwen3, "/no_think" to a template that reads it) is caught there and
// renders in full.
//
// Invariants:
//   1. Render returns a rendering only for messages that equal a remembered conversation
//      but for the contents of its last n_open messages, with the same options on the
//      same day; everything but the prompt is the remembered rendering's.
//   2. The stand-in's rendering with the real contents starts, ends and is cut where the
//      placeholder one is (each inner cut found exactly once), and agrees on everything
//      but the prompt; else nullopt.
//   3. Remember keeps nothing unless the placeholder shows exactly n_open times in both
//      renderings (once per new message, nowhere else).
//   4. Splicing is exact for every conversation SpliceRenderTest renders on every template
//      llama.cpp ships; that the stand-in speaks for the whole conversation is the
//      assumption those tests check, not a proof.
//
// Thread safety: Remember and Render may be called from any thread at once (the
// remembered renderings sit behind a mutex).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/chat_template.h"

namespace hearth::engine {

class SpliceRender {
 public:
  // A whole rendering (one pass or llama.cpp's), for conversations and their stand-ins.
  using RenderFn = std::function<StatusOr<RenderedPrompt>(std::span<const ChatMessage>, const RenderOptions&)>;

  // Keeps the newest `max_remembered` renderings (about twice its conversation's size
  // each), one per conversation whose reply ended last.
  explicit SpliceRender(RenderFn render, size_t max_remembered = 32);
  ~SpliceRender();

  // Renders `messages` whole and remembers the result: their last `n_open` messages all
  // hold the same non-empty placeholder content. Keeps nothing where it could not splice
  // later (invariant 3, a stand-in that does not render, a bad n_open).
  StatusOr<RenderedPrompt> RenderAndRemember(std::span<const ChatMessage> messages, const RenderOptions& options,
                                             size_t n_open);

  // The rendering of `messages` spliced from a remembered one, or nullopt (invariants 1
  // and 2): the caller then renders it whole. Costs a comparison of the messages and one
  // rendering of the stand-in. A conversation still being rendered by RenderAndRemember
  // is waited for: that render began earlier than this one could.
  std::optional<RenderedPrompt> Render(std::span<const ChatMessage> messages, const RenderOptions& options) const;

  // How many renderings Render spliced, for tests and measurements.
  size_t n_spliced() const;

 private:
  struct Remembered;
  std::shared_ptr<const Remembered> Find(std::span<const ChatMessage> messages, const RenderOptions& options) const;
  // Cuts `rendered` and renders the stand-in; false where it cannot splice later.
  bool Prepare(Remembered& r, const RenderedPrompt& rendered) const;

  const RenderFn render_;
  const size_t max_remembered_;
  mutable std::mutex mu_;
  mutable std::condition_variable prepared_;                          // a Remembered became done
  mutable std::deque<std::shared_ptr<Remembered>> remembered_;  // newest first; guarded by mu_
  mutable size_t n_spliced_ = 0;                                      // guarded by mu_
};

}  // namespace hearth::engine
