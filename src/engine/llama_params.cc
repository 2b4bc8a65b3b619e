#include "engine/llama_params.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "common.h"  // llama.cpp's common library: common_cpu_get_num_math()

namespace hearth::engine {
namespace {

struct KvType {
  const char* name;
  ggml_type type;
};

// llama-server's -ctk / -ctv choices.
constexpr KvType kKvTypes[] = {
    {"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16},
    {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1},
    {"iq4_nl", GGML_TYPE_IQ4_NL}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
};

const KvType* FindKvType(std::string_view name) {
  for (const KvType& t : kKvTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Whether the CPU backend offers ggml's AMX buffer type (an Intel CPU with AMX, a build with
// it compiled in). Its matrix product for F16 weights is wrong when sequences are batched:
// on a Sapphire Rapids CPU at llama.cpp 3.21.1 the logits of three sequences decoded
// together differed from each decoded alone by up to 19 (ContextTest.
// BatchedSequencesMatchEachAlone and six more tests failed); with the extra buffer types off
// they match. So on such a CPU hearth loads no weights into extra buffer types (AMX, and
// the repacked CPU layouts with it) until that is fixed upstream.
bool CpuOffersAmx() {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) return false;
  auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
  if (get_extra == nullptr) return false;
  for (ggml_backend_buffer_type_t* b = get_extra(cpu); b != nullptr && *b != nullptr; ++b) {
    if (std::string_view(ggml_backend_buft_name(*b)) == "AMX") return true;
  }
  return false;
}

// Devices a model can offload to (CPU excluded, as llama-server's --list-devices).
std::vector<std::string> OffloadDeviceNames() {
  std::vector<std::string> out;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU) out.push_back(ggml_backend_dev_name(dev));
  }
  return out;
}

Status AddRpcServers(const std::vector<std::string>& servers) {
  if (servers.empty()) return Status::Ok();
  ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
  if (rpc == nullptr) {
    return Unimplemented("--rpc needs llama.cpp built with its RPC backend (GGML_RPC=ON); this build has none");
  }
  using AddServerFn = ggml_backend_reg_t (*)(const char* endpoint);
  auto add = reinterpret_cast<AddServerFn>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
  if (add == nullptr) return Unimplemented("llama.cpp's RPC backend does not offer ggml_backend_rpc_add_server");
  // Registering an endpoint twice would list its device twice; the dry run (memory.h)
  // and the real load both come here.
  static std::mutex mu;
  static std::set<std::string> added;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& endpoint : servers) {
    if (!added.insert(endpoint).second) continue;
    ggml_backend_reg_t reg = add(endpoint.c_str());
    if (reg == nullptr) return InvalidArgument("could not add the RPC server " + endpoint);
    ggml_backend_register(reg);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<DeviceInfo>> ListOffloadDevices(const std::vector<std::string>& rpc_servers) {
  HEARTH_RETURN_IF_ERROR(AddRpcServers(rpc_servers));
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
    DeviceInfo d;
    d.name = ggml_backend_dev_name(dev);
    d.description = ggml_backend_dev_description(dev);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(dev, &free, &total);
    d.free_bytes = free;
    d.total_bytes = total;
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<FlashAttn> ParseFlashAttn(std::string_view text) {
  if (text == "auto") return FlashAttn::kAuto;
  if (text == "on" || text == "1" || text == "true" || text == "enabled") return FlashAttn::kOn;
  if (text == "off" || text == "0" || text == "false" || text == "disabled") return FlashAttn::kOff;
  return InvalidArgument("flash attention must be on, off or auto, got '" + std::string(text) + "'");
}

const char* FlashAttnName(FlashAttn mode) {
  switch (mode) {
    case FlashAttn::kAuto: return "auto";
    case FlashAttn::kOn: return "on";
    case FlashAttn::kOff: return "off";
  }
  return "?";
}

const std::vector<std::string>& KvCacheTypes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const KvType& t : kKvTypes) out.emplace_back(t.name);
    return out;
  }();
  return names;
}

Status ContextOptions::Validate() const {
  if (n_ctx < 16) return InvalidArgument("n_ctx must be at least 16, got " + std::to_string(n_ctx));
  if (n_batch < 1) return InvalidArgument("n_batch must be positive");
  if (n_ubatch < 1 || n_ubatch > n_batch) return InvalidArgument("n_ubatch must be in [1, n_batch]");
  if (n_seq_max < 1 || n_seq_max > 256) return InvalidArgument("n_seq_max must be in [1, 256]");
  if (n_threads < 0) return InvalidArgument("n_threads must not be negative");
  for (const auto& [flag, type] : {std::pair{"-ctk/--cache-type-k", &type_k}, std::pair{"-ctv/--cache-type-v", &type_v}}) {
    if (FindKvType(*type) == nullptr) {
      return InvalidArgument(std::string(flag) + " must be one of " + Joined(KvCacheTypes()) + ", got '" + *type + "'");
    }
  }
  if (flash_attn == FlashAttn::kOff && ggml_is_quantized(FindKvType(type_v)->type)) {
    return InvalidArgument("a quantized V cache (-ctv " + type_v + ") needs flash attention: use -fa on or auto");
  }
  return Status::Ok();
}

Status ModelOptions::Validate() const {
  if (split_mode != "none" && split_mode != "layer" && split_mode != "row") {
    return InvalidArgument("-sm/--split-mode must be none, layer or row, got '" + split_mode + "'");
  }
  if (main_gpu < 0) return InvalidArgument("-mg/--main-gpu must not be negative");
  for (float f : tensor_split) {
    if (!(f >= 0)) return InvalidArgument("-ts/--tensor-split proportions must not be negative");
  }
  if (tensor_split.size() > llama_max_devices()) {
    return InvalidArgument("-ts/--tensor-split has " + std::to_string(tensor_split.size()) +
                           " entries; llama.cpp handles at most " + std::to_string(llama_max_devices()) + " devices");
  }
  if (devices.size() > 1 && std::find(devices.begin(), devices.end(), "none") != devices.end()) {
    return InvalidArgument("-dev none cannot be combined with other devices");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<LlamaModelSetup>> LlamaModelParams(const ModelOptions& options) {
  HEARTH_RETURN_IF_ERROR(options.Validate());
  HEARTH_RETURN_IF_ERROR(AddRpcServers(options.rpc_servers));
  auto setup = std::make_unique<LlamaModelSetup>();
  llama_model_params& mp = setup->params;
  mp = llama_model_default_params();
  mp.use_extra_bufts = !CpuOffersAmx();
  mp.n_gpu_layers = options.n_gpu_layers;
  if (!options.use_mmap) mp.load_mode = options.use_mlock ? LLAMA_LOAD_MODE_MLOCK : LLAMA_LOAD_MODE_NONE;
  else if (options.use_mlock) mp.load_mode = LLAMA_LOAD_MODE_MMAP_MLOCK;
  mp.split_mode = options.split_mode == "none"  ? LLAMA_SPLIT_MODE_NONE
                  : options.split_mode == "row" ? LLAMA_SPLIT_MODE_ROW
                                                : LLAMA_SPLIT_MODE_LAYER;
  mp.main_gpu = options.main_gpu;
  if (options.devices.size() == 1 && options.devices[0] == "none") {
    setup->devices = {nullptr};
  } else if (!options.devices.empty()) {
    for (const auto& name : options.devices) {
      ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
      if (dev == nullptr || ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) {
        const auto found = OffloadDeviceNames();
        return InvalidArgument("-dev/--device: no device named '" + name + "'; found: " +
                               (found.empty() ? std::string("none (CPU only)") : Joined(found)));
      }
      setup->devices.push_back(dev);
    }
    setup->devices.push_back(nullptr);
  }
  if (!setup->devices.empty()) mp.devices = setup->devices.data();
  if (!options.tensor_split.empty()) {
    setup->tensor_split.assign(llama_max_devices(), 0.0f);
    std::copy(options.tensor_split.begin(), options.tensor_split.end(), setup->tensor_split.begin());
    mp.tensor_split = setup->tensor_split.data();
  }
  return setup;
}

llama_context_params LlamaContextParams(const ContextOptions& options) {
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<uint32_t>(options.n_ctx);
  p.n_batch = static_cast<uint32_t>(options.n_batch);
  p.n_ubatch = static_cast<uint32_t>(options.n_ubatch);
  p.n_seq_max = static_cast<uint32_t>(options.n_seq_max);
  // Unset: as llama-server, the cores useful for math (performance cores, one thread per
  // physical core), not every hardware thread: on hybrid and SMT CPUs more threads
  // than that wait on each other and decode slower.
  const int threads = options.n_threads > 0 ? options.n_threads : std::max(1, common_cpu_get_num_math());
  p.n_threads = threads;
  p.n_threads_batch = threads;
  p.kv_unified = true;
  // A sliding-window layer's cache holds its window per sequence, as llama-server's does
  // (llama.cpp's default sizes it to the whole context: Gemma 4 31B's 50 sliding layers
  // would then take about ten times the KV of its 10 global ones). What slides out is
  // kept only in partial states; Context::TruncateSeq refuses a trim past the window.
  p.swa_full = false;
  switch (options.flash_attn) {
    case FlashAttn::kAuto: p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO; break;
    case FlashAttn::kOn: p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED; break;
    case FlashAttn::kOff: p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; break;
  }
  p.type_k = FindKvType(options.type_k)->type;
  p.type_v = FindKvType(options.type_v)->type;
  p.no_perf = true;
  return p;
}

}  // namespace hearth::engine
