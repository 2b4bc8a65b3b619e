#include "server/context_size.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace hearth::server {
namespace {

// Cells one budget allows; 0 when the reserved part alone does not fit.
int64_t CellsAllowed(const MemoryBudget& b) {
  const uint64_t taken = b.reserved_bytes + kMemoryHeadroomBytes;
  if (b.free_bytes <= taken) return 0;
  if (b.bytes_per_cell <= 0) return std::numeric_limits<int>::max();
  const double cells = static_cast<double>(b.free_bytes - taken) / b.bytes_per_cell;
  return static_cast<int64_t>(std::min(cells, static_cast<double>(std::numeric_limits<int>::max())));
}

std::string FormatCells(int64_t cells) {
  char buf[32];
  if (cells >= 1'000'000) {
    std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(cells) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(cells));
  }
  return buf;
}

}  // namespace

ContextSizeChoice ChooseContextSize(const ContextSizeInputs& in) {
  ContextSizeChoice out;
  for (const MemoryBudget& b : in.budgets) {
    const int64_t cells = CellsAllowed(b);
    if (!out.memory_cells || cells < *out.memory_cells) {
      out.memory_cells = cells;
      out.binding_memory = b.name;
    }
  }
  const int train = in.n_ctx_train;
  if (in.requested_cells) {
    out.n_ctx = *in.requested_cells;
    out.bound = ContextBound::kRequested;
  } else if (train <= 0 && !out.memory_cells) {
    out.n_ctx = kCellsWithoutTrainingContext;
    out.bound = ContextBound::kUnknown;
  } else {
    const int64_t want = train > 0 ? train : std::numeric_limits<int>::max();
    const int64_t floor = std::min<int64_t>(kMinCells, want);
    const int64_t fit = out.memory_cells.value_or(want) / kCellAlign * kCellAlign;
    if (fit >= want) {
      out.n_ctx = static_cast<int>(want);
      out.bound = ContextBound::kTrainingContext;
    } else if (fit >= floor) {
      out.n_ctx = static_cast<int>(fit);
      out.bound = ContextBound::kMemory;
    } else {
      out.n_ctx = static_cast<int>(floor);
      out.bound = ContextBound::kMemoryShort;
    }
  }
  out.n_ctx_seq = train > 0 ? std::min(out.n_ctx, train) : out.n_ctx;
  return out;
}

std::vector<MemoryBudget> BudgetsFor(const engine::ContextMemory& memory, uint64_t ram_tier_bytes) {
  std::vector<MemoryBudget> out;
  for (const engine::MemoryPool& p : memory.pools) {
    MemoryBudget b;
    b.name = p.name;
    b.free_bytes = p.free_bytes;
    b.reserved_bytes = p.weights_bytes + p.fixed_bytes + (p.host ? ram_tier_bytes : 0);
    b.bytes_per_cell = p.kv_bytes_per_cell + p.compute_bytes_per_cell;
    out.push_back(std::move(b));
  }
  return out;
}

std::string ExplainContextSize(const ContextSizeInputs& in, const ContextSizeChoice& choice) {
  std::string memory = "memory not measured";
  if (choice.memory_cells) {
    memory = choice.binding_memory + " memory allows " + FormatCells(*choice.memory_cells) + " after " +
             "weights, buffers" + (choice.binding_memory == "host" ? ", the RAM tier" : "") + " and " +
             FormatBytes(static_cast<double>(kMemoryHeadroomBytes)) + " headroom";
  }
  const std::string train = in.n_ctx_train > 0 ? "training context " + std::to_string(in.n_ctx_train)
                                                : "no training context in the model";
  std::string out = std::to_string(choice.n_ctx) + " cells: ";
  switch (choice.bound) {
    case ContextBound::kRequested:
      out += "given by --ctx-size (" + train + "; " + memory + ")";
      if (choice.memory_cells && choice.n_ctx > *choice.memory_cells) out += "; more than memory allows";
      break;
    case ContextBound::kTrainingContext:
      out += "the model's training context (" + memory + ")";
      break;
    case ContextBound::kMemory:
      out += "bound by memory: " + memory + " (" + train + ")";
      break;
    case ContextBound::kMemoryShort:
      out += "the minimum, though " + memory + " (" + train + "); it may not fit";
      break;
    case ContextBound::kUnknown:
      out += "a default (" + train + "; " + memory + ")";
      break;
  }
  if (choice.n_ctx_seq < choice.n_ctx) {
    out += "; one sequence holds at most " + std::to_string(choice.n_ctx_seq) + " (the training context)";
  }
  return out;
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace hearth::server
