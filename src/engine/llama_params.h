// For src/engine only: ModelOptions and ContextOptions as llama.cpp's parameter structs,
// so a model loaded or a context created for real and one built for a dry run
// (memory.h) are built alike.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/context.h"
#include "engine/model.h"
#include "llama.h"

namespace hearth::engine {

// llama_model_params and what its pointers point at: keep it alive while a model loads.
struct LlamaModelSetup {
  llama_model_params params;
  std::vector<ggml_backend_dev_t> devices;  // null-terminated; empty: llama.cpp's default
  std::vector<float> tensor_split;          // llama_max_devices() entries, or empty
};

// Registers options.rpc_servers with llama.cpp (each once per process) and looks up the
// devices by name. Errors: kInvalidArgument (bad options, an unknown device: the message
// lists those found), kUnimplemented (RPC servers given but this llama.cpp has no RPC
// backend).
StatusOr<std::unique_ptr<LlamaModelSetup>> LlamaModelParams(const ModelOptions& options);
// REQUIRES: options.Validate() is ok.
llama_context_params LlamaContextParams(const ContextOptions& options);

}  // namespace hearth::engine
