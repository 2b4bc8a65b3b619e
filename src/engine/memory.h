// MeasureContextMemory: what a model and a context of given options would take in each
// memory (host RAM, each GPU), measured by llama.cpp building both without allocating
// anything (its no_alloc dry run, the one llama-server's --fit uses), so the numbers
// include what arithmetic on the model's shape would miss: compute buffers, padding,
// output buffers, and where each tensor lands.
//
// Thread safety: call from one thread while no other thread uses llama.cpp's log (the
// dry run routes it through a filter that keeps only errors); at start-up, before the
// engine runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/context.h"
#include "engine/model.h"

namespace hearth::engine {

// One memory the backends allocate from, with what a context needs of it as a linear
// function of its KV cells: weights + fixed + bytes_per_cell * n_ctx.
struct MemoryPool {
  std::string name;            // "host" or the device's name ("CUDA0")
  bool host = false;           // host RAM: what the CPU backend and host buffers use
  uint64_t free_bytes = 0;     // free now: MemAvailable for host RAM (base/host_memory.h)
  uint64_t total_bytes = 0;
  uint64_t weights_bytes = 0;  // the model's tensors held here
  uint64_t fixed_bytes = 0;    // context and compute buffers that do not grow with cells:
                               // recurrent states, output buffers
  double kv_bytes_per_cell = 0;       // K and V of the attention layers held here
  double compute_bytes_per_cell = 0;  // compute buffers grow with the cells attended over
};

struct ContextMemory {
  int n_ctx_train = 0;               // the model's training context (GGUF context_length)
  std::vector<MemoryPool> pools;     // host RAM first, then the model's devices
  // What one sequence holds that does not grow with the cells: recurrent (SSM / DeltaNet)
  // state, or a share of the sliding-window layers' cache (sized by llama.cpp from the
  // window, the sequences and the micro-batch, not from the context).
  uint64_t recurrent_bytes_per_seq = 0;
  double kv_bytes_per_cell = 0;      // over all pools
};

// Dry-runs the model at `path` with `model_options` and a context of `options` (n_ctx is
// ignored: contexts of two sizes are measured and a line fitted through them). Reads the
// file's metadata once (its vocabulary included: most of the time it takes); loads no
// weights and allocates no buffers. Errors: kNotFound (no such file), kInvalidArgument
// (llama.cpp cannot load the model or build the context).
StatusOr<ContextMemory> MeasureContextMemory(const std::string& path, const ModelOptions& model_options,
                                             const ContextOptions& options);

}  // namespace hearth::engine
