// ChooseContextSize: how many KV cells `hearth serve` gives its one unified KV cache
// (shared by the parallel and the cached sequences) and how many positions one sequence
// may hold, from the model's training context and the memory the machine has free, the
// way llama-server sizes its context to the model and fits it to memory. A pure function
// of its inputs, so the policy is tested without a model or a machine.
//
// Policy:
//  1. --ctx-size, when given, is the cell count, whatever memory says.
//  2. Otherwise the cells are the model's training context, capped by each memory's
//     budget: free - headroom - reserved (weights, fixed buffers, the RAM tier), divided
//     by the bytes one more cell costs there (KV and compute buffers); rounded down to
//     kCellAlign; never below kMinCells (nor the training context, when smaller).
//  3. One sequence holds at most min(cells, training context) positions: past its
//     training context a model's output is noise (llama-server caps its slots alike).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory.h"

namespace hearth::server {

inline constexpr uint64_t kMemoryHeadroomBytes = 1ull << 30;  // llama.cpp's --fit leaves 1 GiB too
inline constexpr int kMinCells = 4096;
inline constexpr int kCellAlign = 256;                        // llama.cpp pads n_ctx to 256
inline constexpr int kCellsWithoutTrainingContext = 8192;     // a GGUF without context_length

// One memory the context draws on, as the policy sees it.
struct MemoryBudget {
  std::string name;             // "host", "CUDA0"
  uint64_t free_bytes = 0;
  uint64_t reserved_bytes = 0;  // taken before any cell: weights, fixed buffers, RAM tier
  double bytes_per_cell = 0;    // what one more KV cell costs here, compute buffers included
};

struct ContextSizeInputs {
  std::optional<int> requested_cells;  // --ctx-size
  int n_ctx_train = 0;                 // 0: the model does not say
  std::vector<MemoryBudget> budgets;   // empty: memory was not measured
};

enum class ContextBound {
  kRequested,         // --ctx-size
  kTrainingContext,   // the model's training context fits in memory
  kMemory,            // memory allows fewer cells than the training context
  kMemoryShort,       // memory allows fewer than kMinCells: kMinCells anyway
  kUnknown,           // no training context and no measurement: kCellsWithoutTrainingContext
};

struct ContextSizeChoice {
  int n_ctx = 0;                     // KV cells
  int n_ctx_seq = 0;                 // most positions one sequence may hold
  ContextBound bound = ContextBound::kUnknown;
  std::optional<int64_t> memory_cells;  // most cells memory allows; nullopt when not measured
  std::string binding_memory;        // the budget with the fewest cells, when measured
};

ContextSizeChoice ChooseContextSize(const ContextSizeInputs& in);

// The budgets of a measured context: each pool's free bytes, its weights and fixed
// buffers (plus `ram_tier_bytes` on the host), and its KV and compute bytes per cell.
std::vector<MemoryBudget> BudgetsFor(const engine::ContextMemory& memory, uint64_t ram_tier_bytes);

// "262144 cells: the model's training context (memory allows 1.2M)", for the start-up log.
std::string ExplainContextSize(const ContextSizeInputs& in, const ContextSizeChoice& choice);

// "512 B", "1.5 MiB", "20.3 GiB".
std::string FormatBytes(double bytes);

}  // namespace hearth::server
