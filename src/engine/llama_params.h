// For src/engine only: ModelOptions and ContextOptions as llama.cpp's parameter structs,
// so a model loaded or a context created for real and one built for a dry run
// (memory.h) are built alike.
#pragma once

#include "engine/context.h"
#include "engine/model.h"
#include "llama.h"

namespace hearth::engine {

llama_model_params LlamaModelParams(const ModelOptions& options);
// REQUIRES: options.Validate() is ok.
llama_context_params LlamaContextParams(const ContextOptions& options);

}  // namespace hearth::engine
