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
  ScopedLogCapture();
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string* previous_;
};

}  // namespace hearth::engine
