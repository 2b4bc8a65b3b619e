// LocalRenderBackend: counts new tokens with hearth's own renderer (the model file's chat
// template through llama.cpp's common chat library, and its tokenizer), instead of a
// server's /apply-template and /tokenize. Same renderer code as llama-server and hearth,
// so the counts match theirs; and it works against servers that have no such routes
// (vLLM, SGLang, mlx) and renders a final assistant message closed, which llama-server's
// /apply-template does not (it continues it, and refuses one with tool calls).
//
// Thread safety: one thread (the loaded model is read-only, but the backend is not shared).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "bench/render.h"

namespace hearth::bench {

class LocalRenderBackend : public RenderBackend {
 public:
  // Loads `model_path` (weights are memory-mapped, not read). Errors: those of
  // engine::Model::Load and engine::ChatTemplate::Create.
  static StatusOr<std::unique_ptr<LocalRenderBackend>> Open(const std::string& model_path);
  ~LocalRenderBackend() override;

  StatusOr<std::string> ApplyTemplate(const Json& body) override;
  StatusOr<int> CountTokens(const std::string& text) override;

 private:
  struct Impl;
  explicit LocalRenderBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::bench
