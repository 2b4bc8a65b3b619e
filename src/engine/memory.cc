#include "engine/memory.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "base/host_memory.h"
#include "engine/llama_params.h"
#include "ggml-backend.h"
// llama.cpp's staging API: the per-buffer memory breakdown and the model's devices, as
// common/fit.cpp (llama-server's --fit) reads them. Pinned with the llama.cpp version.
#include "../src/llama-ext.h"

namespace hearth::engine {
namespace {

// The two context sizes measured; the line through them extrapolates well because
// llama.cpp's buffers grow linearly in the cells (KV rows, attention scores).
constexpr int kSmallCells = 1024;
constexpr int kLargeCellsAtLeast = 4096;

struct Sizes {
  double model = 0, context = 0, compute = 0;
};

// Only llama.cpp's errors reach the log during the dry run: its warnings there (a context
// smaller than the training one) are about contexts that never run.
struct QuietLog {
  ggml_log_callback callback = nullptr;
  void* user = nullptr;
  QuietLog() {
    llama_log_get(&callback, &user);
    llama_log_set(
        [](ggml_log_level level, const char* text, void* self) {
          auto* q = static_cast<QuietLog*>(self);
          if (level == GGML_LOG_LEVEL_ERROR && q->callback) q->callback(level, text, q->user);
        },
        this);
  }
  ~QuietLog() { llama_log_set(callback, user); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;
};

// Bytes per pool of a context of `options` on the dry-run `model`: the model's devices in
// order, then the host. nullopt when llama.cpp cannot build the context.
std::optional<std::vector<Sizes>> Measure(llama_model* model, const ContextOptions& options) {
  std::unique_ptr<llama_context, LlamaContextDeleter> ctx(llama_init_from_model(model, LlamaContextParams(options)));
  if (ctx == nullptr) return std::nullopt;
  const int n_devices = llama_model_n_devices(model);
  std::vector<Sizes> out(static_cast<size_t>(n_devices) + 1);
  for (const auto& [buft, mb] : llama_get_memory_breakdown(ctx.get())) {
    size_t at = out.size() - 1;
    if (!ggml_backend_buft_is_host(buft)) {
      ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
      for (int i = 0; i < n_devices; ++i) {
        if (dev != nullptr && dev == llama_model_get_device(model, i)) at = static_cast<size_t>(i);
      }
    }
    out[at].model += static_cast<double>(mb.model);
    out[at].context += static_cast<double>(mb.context);
    out[at].compute += static_cast<double>(mb.compute);
  }
  return out;
}

uint64_t Clamped(double v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }

}  // namespace

StatusOr<ContextMemory> MeasureContextMemory(const std::string& path, const ModelOptions& model_options,
                                             const ContextOptions& options) {
  InitBackend(false);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("model file not found: " + path);
  QuietLog quiet;
  auto setup = LlamaModelParams(model_options);
  if (!setup.ok()) return setup.status();
  llama_model_params mp = (*setup)->params;
  mp.no_alloc = true;
  mp.load_mode = LLAMA_LOAD_MODE_NONE;
  std::unique_ptr<llama_model, LlamaModelDeleter> model(llama_model_load_from_file(path.c_str(), mp));
  if (model == nullptr) return InvalidArgument("llama.cpp could not read " + path + " to measure its memory");

  ContextMemory out;
  out.n_ctx_train = std::min(llama_model_n_ctx_train(model.get()), 1 << 30);
  ContextOptions small = options;
  small.n_ctx = kSmallCells;
  ContextOptions large = options;
  large.n_ctx = std::max(kLargeCellsAtLeast, (out.n_ctx_train + 255) / 256 * 256);
  const auto a = Measure(model.get(), small);
  const auto b = a ? Measure(model.get(), large) : std::nullopt;
  if (!b) return InvalidArgument("llama.cpp could not build a context on " + path + " to measure its memory");

  const double span = large.n_ctx - small.n_ctx;
  double recurrent = 0;
  // Host first: every model uses it.
  for (size_t k = 0; k < a->size(); ++k) {
    const size_t i = (k + a->size() - 1) % a->size();
    const Sizes& sa = (*a)[i];
    const Sizes& sb = (*b)[i];
    MemoryPool pool;
    pool.host = i + 1 == a->size();
    size_t free = 0, total = 0;
    if (pool.host) {
      pool.name = "host";
      if (ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
        ggml_backend_dev_memory(cpu, &free, &total);
      }
      // ggml's CPU backend calls all of RAM free on Linux.
      if (auto avail = AvailableHostMemory()) free = total > 0 ? std::min<uint64_t>(*avail, total) : *avail;
    } else {
      ggml_backend_dev_t dev = llama_model_get_device(model.get(), static_cast<int>(i));
      pool.name = ggml_backend_dev_name(dev);
      ggml_backend_dev_memory(dev, &free, &total);
    }
    pool.free_bytes = free;
    pool.total_bytes = total;
    pool.weights_bytes = Clamped(sa.model);
    pool.kv_bytes_per_cell = std::max(0.0, (sb.context - sa.context) / span);
    pool.compute_bytes_per_cell = std::max(0.0, (sb.compute - sa.compute) / span);
    const double fixed_context = sa.context - pool.kv_bytes_per_cell * small.n_ctx;
    const double fixed_compute = sa.compute - pool.compute_bytes_per_cell * small.n_ctx;
    pool.fixed_bytes = Clamped(fixed_context) + Clamped(fixed_compute);
    recurrent += std::max(0.0, fixed_context);
    out.kv_bytes_per_cell += pool.kv_bytes_per_cell;
    out.pools.push_back(std::move(pool));
  }
  out.recurrent_bytes_per_seq = Clamped(recurrent / std::max(1, options.n_seq_max));
  return out;
}

}  // namespace hearth::engine
