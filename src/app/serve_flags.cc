#include "app/serve_flags.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>

#include "engine/context.h"

namespace hearth::app {
namespace {

// llama-server flags hearth refuses, with why; each takes a value unless marked.
struct Unsupported {
  const char* names;  // CLI11 spelling: "-x,--long"
  bool takes_value;
  const char* why;
};

constexpr Unsupported kUnsupported[] = {
    {"--lora", true, "LoRA adapters are not supported"},
    {"--lora-scaled", true, "LoRA adapters are not supported"},
    {"--control-vector", true, "control vectors are not supported"},
    {"--model-draft", true, "speculative decoding is not supported yet"},
    {"--mmproj", true, "multimodal projectors are not supported"},
    {"--hf-repo", true, "hearth never downloads models: pass a local file with -m"},
    {"--model-url", true, "hearth never downloads models: pass a local file with -m"},
    {"--embedding,--embeddings", false, "embeddings are not served"},
    {"--reranking,--rerank", false, "reranking is not served"},
    {"--slot-save-path", true, "hearth keeps conversations itself: use --cache-dir"},
    {"--cache-reuse", true, "hearth reuses prefixes itself (the prefix cache)"},
    {"--no-jinja", false, "hearth always renders the model's Jinja template"},
    {"--chat-template", true, "use --chat-template-file with the template's text"},
    {"--grammar", true, "a server-wide grammar is not supported"},
    {"--grammar-file", true, "a server-wide grammar is not supported"},
    {"--no-kv-offload", false, "the KV cache always lives with its layers"},
    {"--numa", true, "NUMA placement is not supported"},
    {"--cont-batching", false, "continuous batching is always on"},
};

// "3,1" or "3/1" (llama-server takes either).
StatusOr<std::vector<float>> ParseSplit(const std::string& text) {
  std::vector<float> out;
  std::string item;
  std::stringstream in(text);
  while (std::getline(in, item, text.find('/') != std::string::npos ? '/' : ',')) {
    char* end = nullptr;
    const float v = std::strtof(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size()) {
      return InvalidArgument("-ts/--tensor-split takes proportions like 3,1; got '" + text + "'");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// llama-server's multi-letter single-dash flags (CLI11 takes "-ngl" for -n -g -l).
constexpr std::pair<const char*, const char*> kLlamaShortFlags[] = {
    {"-ngl", "--n-gpu-layers"}, {"-dev", "--device"},        {"-sm", "--split-mode"},
    {"-mg", "--main-gpu"},      {"-ts", "--tensor-split"},   {"-ub", "--ubatch-size"},
    {"-fa", "--flash-attn"},    {"-ctk", "--cache-type-k"},  {"-ctv", "--cache-type-v"},
    {"-np", "--parallel"},      {"-md", "--model-draft"},    {"-hf", "--hf-repo"},
    {"-mu", "--model-url"},     {"-nkvo", "--no-kv-offload"}, {"-cb", "--cont-batching"},
};

}  // namespace

std::vector<std::string> ExpandLlamaServerFlags(std::vector<std::string> args) {
  bool serve = false;  // only `hearth serve`'s arguments
  for (auto& arg : args) {
    if (!serve) {
      serve = arg == "serve";
      continue;
    }
    if (arg == "--") break;
    const std::string name = arg.substr(0, arg.find('='));
    for (const auto& [short_name, long_name] : kLlamaShortFlags) {
      if (name == short_name) arg = long_name + arg.substr(name.size());
    }
  }
  return args;
}

namespace {

// The model file, and the devices its layers go to.
void AddModelFlags(CLI::App& cmd, ServeFlags& f) {
  const char* kModel = "Model and devices";
  cmd.add_option("-m,--model", f.model_path, "GGUF model file (required)")->group(kModel);
  cmd.add_option("--n-gpu-layers,--gpu-layers", f.n_gpu_layers,
                 "-ngl: layers to offload to the accelerator: a number, 'all' or 'auto' (default: all)")
      ->group(kModel);
  cmd.add_flag("!--no-mmap", f.model.use_mmap, "read the weights into memory instead of mapping the file")
      ->group(kModel);
  cmd.add_flag("--mmap", f.model.use_mmap, "map the model file (default)")->group(kModel);
  cmd.add_flag("--mlock", f.model.use_mlock, "keep the weights in RAM (no swapping or compression)")->group(kModel);
  cmd.add_option("--device", f.devices,
                 "-dev: comma-separated devices to offload to ('none': CPU only; see --list-devices)")
      ->group(kModel);
  cmd.add_flag("--list-devices", f.list_devices, "print the devices llama.cpp found and exit")->group(kModel);
  cmd.add_option("--split-mode", f.model.split_mode, "-sm: across several devices: none, layer or row")
      ->capture_default_str()
      ->group(kModel);
  cmd.add_option("--main-gpu", f.model.main_gpu, "-mg: the device used whole with -sm none")
      ->capture_default_str()
      ->group(kModel);
  cmd.add_option("--tensor-split", f.tensor_split, "-ts: share of the model per device, e.g. 3,1")->group(kModel);
  cmd.add_option("--rpc", f.rpc_servers,
                 "comma-separated llama.cpp RPC servers (host:port) whose devices the model may use")
      ->group(kModel);
}

// The KV cells and how the context decodes.
void AddContextFlags(CLI::App& cmd, ServeFlags& f) {
  const char* kContext = "Context and KV cache";
  cmd.add_option("-c,--ctx-size", f.ctx_size,
                 "KV cells shared by all sequences (0: the model's training context; default: that, capped by free "
                 "memory)")
      ->group(kContext);
  cmd.add_option("-b,--batch-size", f.engine.context.n_batch, "tokens per decode step")
      ->capture_default_str()
      ->group(kContext);
  cmd.add_option("--ubatch-size", f.engine.context.n_ubatch, "-ub: physical micro-batch")
      ->capture_default_str()
      ->group(kContext);
  cmd.add_option("-t,--threads", f.engine.context.n_threads, "CPU threads (0: as llama.cpp picks: performance cores)")
      ->group(kContext);
  cmd.add_option("--flash-attn", f.flash_attn, "-fa: flash attention: on, off or auto")
      ->capture_default_str()
      ->group(kContext);
  cmd.add_option("--cache-type-k", f.engine.context.type_k, "-ctk: KV cache type for K (f16, q8_0, q4_0, ...)")
      ->capture_default_str()
      ->group(kContext);
  cmd.add_option("--cache-type-v", f.engine.context.type_v,
                 "-ctv: KV cache type for V (a quantized type needs flash attention)")
      ->capture_default_str()
      ->group(kContext);
}

// HTTP, keys, limits and defaults for requests that set none.
void AddServerFlags(CLI::App& cmd, ServeFlags& f) {
  const char* kServer = "Server";
  cmd.add_option("--host", f.http.host, "address to listen on")->capture_default_str()->group(kServer);
  cmd.add_option("--port", f.http.port, "port (0: any free port)")->capture_default_str()->group(kServer);
  cmd.add_option("--api-key", f.api_keys,
                 "require a key (Bearer or x-api-key); repeat for several clients, each with its own cache namespace "
                 "(visible to local users in ps: prefer --api-key-file or HEARTH_API_KEY)")
      ->group(kServer);
  cmd.add_option("--api-key-file", f.api_key_file,
                 "file of API keys, one per line ('#' comments); must not be readable by group or others")
      ->group(kServer);
  cmd.add_flag("--cors", f.http.cors, "allow cross-origin browser requests")->group(kServer);
  cmd.add_option("-n,--n-predict,--predict", f.n_predict,
                 "most tokens generated for a request that sets no max_tokens of its own (-1: unlimited, until a "
                 "stop or the context is full)")
      ->capture_default_str()
      ->group(kServer);
  cmd.add_option("-a,--alias", f.http.model_alias, "model id reported to clients (default: file name)")
      ->group(kServer);
  cmd.add_option("-P,--parallel", f.engine.n_parallel, "-np: requests decoded together")
      ->capture_default_str()
      ->group(kServer);
  cmd.add_option("--max-queue", f.engine.max_queued, "requests that may wait for a slot before 503")
      ->capture_default_str()
      ->group(kServer);
  cmd.add_option("--max-body", f.http.max_body_bytes, "largest request body in bytes")
      ->capture_default_str()
      ->group(kServer);
  cmd.add_flag("-v,--verbose", f.verbose,
               "log llama.cpp's messages, why shadows were dropped, and the earlier text a volatile span replaced")
      ->group(kServer);
}

// How conversations are rendered and replies parsed.
void AddChatFlags(CLI::App& cmd, ServeFlags& f) {
  const char* kChat = "Chat";
  cmd.add_flag("--jinja", f.jinja, "accepted for llama-server's command lines: hearth always uses the Jinja template")
      ->group(kChat);
  cmd.add_option("--chat-template-file", f.chat_template_file, "Jinja template to use instead of the model's")
      ->group(kChat);
  cmd.add_option("--chat-template-kwargs", f.chat_template_kwargs,
                 "JSON object of template variables for every request, e.g. '{\"enable_thinking\":false}' "
                 "(a request's own chat_template_kwargs win)")
      ->group(kChat);
  cmd.add_option("--reasoning-format", f.http.chat_defaults.reasoning_format,
                 "where thinking goes: auto or deepseek (reasoning_content), deepseek-legacy (also left in "
                 "content), none (left in content)")
      ->capture_default_str()
      ->group(kChat);
  cmd.add_option("--stabilize", f.stabilize,
                 "move per-request spans out of the cacheable prefix: uuid, ulid, timestamp, claude-billing, re:REGEX")
      ->delimiter(',')
      ->group(kChat);
  cmd.add_flag("--stabilize-drop", f.stabilize_drop, "drop matched spans instead of moving them to the end")
      ->group(kChat);
}

// hearth's own: the tiers, warm-ahead and shadow prefill.
void AddPrefixCacheFlags(CLI::App& cmd, ServeFlags& f) {
  const char* kCache = "Prefix cache (hearth)";
  cmd.add_option("--cache-seqs", f.cache_sequences, "idle conversations kept on the device")
      ->capture_default_str()
      ->group(kCache);
  cmd.add_option("--cache-ram", f.cache_ram_mib, "MiB of host RAM for cached states")
      ->capture_default_str()
      ->group(kCache);
  cmd.add_option("--cache-pin-minutes", f.engine.cache_pin_minutes,
                 "keep each conversation active this recently in RAM before idle ones (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(kCache);
  cmd.add_option("--cache-pin-budget", f.cache_pin_mib,
                 "MiB of the RAM tier that pins may hold (default: half of --cache-ram)")
      ->group(kCache);
  cmd.add_option("--cache-dir", f.engine.cache_dir, "directory for the disk tier (survives restarts)")->group(kCache);
  cmd.add_option("--cache-disk", f.cache_disk_mib, "MiB of disk for cached states")
      ->capture_default_str()
      ->group(kCache);
  cmd.add_option("--cache-redis", f.cache_redis,
                 "shared tier on Redis, for replicas behind one load balancer: redis://[user:password@]host:port[/db] "
                 "or unix:///path (one seed of a Redis Cluster is enough); set maxmemory with an LRU policy there")
      ->group(kCache);
  cmd.add_option("--cache-redis-timeout-ms", f.cache_redis_timeout_ms,
                 "longest wait on one Redis send or receive before the shared tier counts as unavailable")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(kCache);
  cmd.add_flag("!--no-warm-ahead", f.http.warm_ahead, "do not prepare the next turn while idle")->group(kCache);
  cmd.add_option("--shadow-prefill", f.shadow_prefill,
                 "where the next turn's form of a reply is prefilled while the reply decodes: with-decode (a few "
                 "tokens beside each decode step), after-reply (when it ends, then warm-ahead; a re-rendered tool "
                 "loop in whole tiles beside the decode), reply-end (when it ends, the rest in the pause before "
                 "the next request), paced (reply-end where clients are seen to pause long enough before a user "
                 "turn, else after-reply), off, or auto (with-decode on a GPU build, paced on a CPU-only one)")
      ->capture_default_str()
      ->group(kCache);
  cmd.add_flag("!--no-cache", f.engine.prefix_cache,
               "no prefix cache at all (every prompt computed in full): a baseline for measuring the cache")
      ->group(kCache);
}

// llama-server's flags hearth refuses: hidden from --help, recorded with why when given
// (FinishServeFlags refuses them).
void AddRefusedFlags(CLI::App& cmd, ServeFlags& f) {
  for (const Unsupported& u : kUnsupported) {
    const std::string names = u.names;
    const std::string why = u.why;
    auto record = [&f, names, why](const auto&) { f.unsupported_given[names.substr(names.rfind(',') + 1)] = why; };
    if (u.takes_value) {
      cmd.add_option_function<std::string>(names, record)->group("");
    } else {
      cmd.add_flag_function(names, record)->group("");
    }
  }
}

}  // namespace

void AddServeFlags(CLI::App& cmd, ServeFlags& f) {
  f.engine.n_parallel = 2;
  // llama-server's batch sizes: a long prompt is prefilled 2048 tokens per engine step (in
  // micro-batches of 512), which keeps a GPU busy; hearth's other commands keep 512.
  f.engine.context.n_batch = kLlamaServerBatch;
  f.engine.context.n_ubatch = kLlamaServerUbatch;
  // In the order --help lists them, which is llama-server's.
  AddModelFlags(cmd, f);
  AddContextFlags(cmd, f);
  AddServerFlags(cmd, f);
  AddChatFlags(cmd, f);
  AddPrefixCacheFlags(cmd, f);
  AddRefusedFlags(cmd, f);
}

Status FinishServeFlags(ServeFlags& f) {
  if (!f.unsupported_given.empty()) {
    const auto& [flag, why] = *f.unsupported_given.begin();
    return InvalidArgument(flag + " is a llama-server flag hearth does not support: " + why);
  }
  if (f.model_path.empty() && !f.list_devices) return InvalidArgument("-m/--model is required");
  if (f.n_gpu_layers == "all" || f.n_gpu_layers == "auto") {
    f.model.n_gpu_layers = -1;
  } else {
    char* end = nullptr;
    const long n = std::strtol(f.n_gpu_layers.c_str(), &end, 10);
    if (f.n_gpu_layers.empty() || *end != '\0' || n < -1 || n > 1 << 20) {
      return InvalidArgument("-ngl/--n-gpu-layers takes a number of layers, 'all' or 'auto'; got '" +
                             f.n_gpu_layers + "'");
    }
    f.model.n_gpu_layers = static_cast<int>(n);
  }
  auto fa = engine::ParseFlashAttn(f.flash_attn);
  if (!fa.ok()) return InvalidArgument("-fa/--flash-attn: " + fa.status().message());
  f.engine.context.flash_attn = *fa;
  if (f.shadow_prefill == "off") {
    f.engine.shadow_feed = server::ShadowFeed::kOff;
  } else if (f.shadow_prefill == "auto") {
    f.engine.shadow_feed = server::DefaultShadowFeed();
  } else if (f.shadow_prefill == "with-decode") {
    f.engine.shadow_feed = server::ShadowFeed::kWithDecode;
  } else if (f.shadow_prefill == "after-reply") {
    f.engine.shadow_feed = server::ShadowFeed::kAfterReply;
  } else if (f.shadow_prefill == "reply-end") {
    f.engine.shadow_feed = server::ShadowFeed::kReplyEnd;
  } else if (f.shadow_prefill == "paced") {
    f.engine.shadow_feed = server::ShadowFeed::kPaced;
  } else {
    return InvalidArgument("--shadow-prefill takes with-decode, after-reply, reply-end, paced, off or auto; got '" +
                           f.shadow_prefill + "'");
  }
  f.model.devices = SplitList(f.devices);
  if (!f.devices.empty() && f.model.devices.empty()) return InvalidArgument("-dev/--device names no device");
  f.model.rpc_servers = SplitList(f.rpc_servers);
  if (!f.tensor_split.empty()) {
    auto split = ParseSplit(f.tensor_split);
    if (!split.ok()) return split.status();
    f.model.tensor_split = std::move(*split);
  }
  HEARTH_RETURN_IF_ERROR(f.model.Validate());
  const std::string& rf = f.http.chat_defaults.reasoning_format;
  if (rf != "auto" && rf != "none" && rf != "deepseek" && rf != "deepseek-legacy") {
    return InvalidArgument("--reasoning-format must be auto, deepseek, deepseek-legacy or none; got '" + rf + "'");
  }
  if (!f.chat_template_kwargs.empty()) {
    const nlohmann::json kwargs = nlohmann::json::parse(f.chat_template_kwargs, nullptr, false);
    if (!kwargs.is_object()) return InvalidArgument("--chat-template-kwargs must be a JSON object");
    for (const auto& [key, value] : kwargs.items()) f.http.chat_defaults.template_kwargs[key] = value.dump();
  }
  if (f.n_predict == 0 || f.n_predict < -1) {
    return InvalidArgument("-n/--n-predict takes a number of tokens, or -1 for unlimited; got " +
                           std::to_string(f.n_predict));
  }
  if (f.n_predict > 0) f.http.chat_defaults.max_tokens = f.n_predict;
  if (f.ctx_size && *f.ctx_size < 0) return InvalidArgument("-c/--ctx-size must not be negative");
  return Status::Ok();
}

}  // namespace hearth::app
