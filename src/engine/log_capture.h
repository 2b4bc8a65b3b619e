// ScopedLogCapture: what llama.cpp logs on this thread while one is alive, for telling
// apart failures that its API reports only as a zero (a state restore that found no free
// KV cells against bytes that do not fit). For src/engine only; needs InitBackend's log
// callback (Model::Load installs it).
//
// Thread safety: captures the calling thread's messages only; not nestable on a thread
// (an inner capture replaces the outer one until it ends).
#pragma once

#include <string>

namespace hearth::engine {

class ScopedLogCapture {
 public:
  // kEcho: llama.cpp's errors and warnings still reach stderr. kHold: they do not, for a
  // failure the caller handles and reports itself (a restore that finds no free cells is
  // retried after the cache makes room; its first attempt is not a failure to log).
  enum class Mode { kEcho, kHold };
  explicit ScopedLogCapture(Mode mode = Mode::kEcho);
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string* previous_;
  bool previous_hold_;
};

}  // namespace hearth::engine
