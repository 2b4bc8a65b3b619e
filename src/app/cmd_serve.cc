// `hearth serve`: load a model and serve the OpenAI and Anthropic APIs.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "app/commands.h"
#include "app/serve_flags.h"
#include "cache/redis_store.h"
#include "engine/chat_template.h"
#include "engine/memory.h"
#include "engine/model.h"
#include "server/api_keys.h"
#include "server/context_size.h"
#include "server/engine_loop.h"
#include "server/http_server.h"

namespace hearth::app {
namespace {

server::HttpServer* g_server = nullptr;

void OnSignal(int) {
  if (g_server) g_server->Stop();
}

// The URL as a log may show it: a password in it becomes "***".
std::string WithoutPassword(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "hearth serve: %s\n", s.ToString().c_str());
  return 1;
}

// The API keys from --api-key, --api-key-file and HEARTH_API_KEY, each with its cache
// namespace (under the secret kept in the cache directory, see api_keys.h).
Status SetUpApiKeys(ServeFlags& f) {
  const char* env = std::getenv("HEARTH_API_KEY");
  auto keys = server::CollectApiKeys(f.api_keys, f.api_key_file,
                                     env ? std::optional<std::string_view>(env) : std::nullopt);
  if (!keys.ok()) return keys.status();
  if (keys->empty()) return Status::Ok();
  const std::string dir = f.engine.prefix_cache ? f.engine.cache_dir : "";
  auto secret = server::LoadNamespaceSecret(dir);
  if (!secret.ok() && !dir.empty()) {
    // Serve rather than refuse: the disk tier is then off too (EngineLoop::Start says so),
    // and a state kept under a per-run secret can only go unmatched after a restart.
    std::fprintf(stderr, "hearth: %s; API key namespaces use a secret for this run only\n",
                 secret.status().message().c_str());
    secret = server::LoadNamespaceSecret("");
  }
  if (!secret.ok()) return secret.status();
  f.http.api_keys = server::MakeApiKeys(*keys, *secret);
  return Status::Ok();
}

// Sets the KV cells and the per-sequence limit (server/context_size.h) and logs what it
// chose and why. `memory` is from before the model was loaded: a GPU's free memory then
// still holds the weights that reserved_bytes counts.
Status SizeContext(ServeFlags& f, const StatusOr<engine::ContextMemory>& memory, const engine::ModelInfo& info) {
  server::ContextSizeInputs in;
  in.requested_cells = f.ctx_size;
  if (f.ctx_size == 0) in.requested_cells = info.n_ctx_train > 0 ? info.n_ctx_train : server::kCellsWithoutTrainingContext;
  in.n_ctx_train = info.n_ctx_train;
  if (memory.ok()) in.budgets = server::BudgetsFor(*memory, f.engine.cache_ram_bytes);
  const server::ContextSizeChoice choice = server::ChooseContextSize(in);
  f.engine.context.n_ctx = choice.n_ctx;
  f.engine.n_ctx_seq = choice.n_ctx_seq;
  HEARTH_RETURN_IF_ERROR(f.engine.context.Validate());

  using server::FormatBytes;
  const int n_seq = f.engine.context.n_seq_max;
  std::fprintf(stderr, "hearth: context %s; shared by %d parallel and %d cached sequences\n",
               server::ExplainContextSize(in, choice).c_str(), f.engine.n_parallel, n_seq - f.engine.n_parallel);
  if (!memory.ok()) {
    std::fprintf(stderr, "hearth: memory not measured: %s\n", memory.status().message().c_str());
  } else {
    const double kv = memory->kv_bytes_per_cell;
    const double recurrent = static_cast<double>(memory->recurrent_bytes_per_seq);
    std::string pools;
    for (const auto& p : memory->pools) {
      const double need = static_cast<double>(p.weights_bytes + p.fixed_bytes) +
                          (p.kv_bytes_per_cell + p.compute_bytes_per_cell) * choice.n_ctx;
      if (p.weights_bytes == 0 && need == 0) continue;
      pools += "; " + p.name + " needs " + FormatBytes(need) + " of " + FormatBytes(static_cast<double>(p.free_bytes)) +
               " free (weights " + FormatBytes(static_cast<double>(p.weights_bytes)) + ", compute " +
               FormatBytes(p.compute_bytes_per_cell * choice.n_ctx) + ")";
    }
    std::fprintf(stderr, "hearth: memory: KV %s/cell (%s), recurrent or window state %s/sequence (%s for %d)%s\n",
                 FormatBytes(kv).c_str(), FormatBytes(kv * choice.n_ctx).c_str(), FormatBytes(recurrent).c_str(),
                 FormatBytes(recurrent * n_seq).c_str(), n_seq, pools.c_str());
  }
  if (f.engine.prefix_cache) {
    const std::string disk = f.engine.cache_dir.empty()
                                 ? std::string("no disk tier (no --cache-dir)")
                                 : "disk tier " + FormatBytes(static_cast<double>(f.engine.cache_disk_bytes)) + " in " +
                                       f.engine.cache_dir;
    const std::string shared = f.cache_redis.empty() ? "" : ", shared tier on " + WithoutPassword(f.cache_redis);
    std::fprintf(stderr, "hearth: cache tiers: RAM %s (host), %s%s\n",
                 FormatBytes(static_cast<double>(f.engine.cache_ram_bytes)).c_str(), disk.c_str(), shared.c_str());
  }
  return Status::Ok();
}

// --list-devices, as llama-server prints them.
void ListDevices(const ServeFlags& f) {
  engine::InitBackend(f.verbose);
  auto devices = engine::ListOffloadDevices(f.model.rpc_servers);
  if (!devices.ok()) {
    std::fprintf(stderr, "hearth serve: %s\n", devices.status().message().c_str());
    throw CLI::RuntimeError(2);
  }
  std::printf("Available devices:\n");
  if (devices->empty()) std::printf("  (none: the model runs on the CPU)\n");
  for (const auto& d : *devices) {
    std::printf("  %s: %s (%llu MiB, %llu MiB free)\n", d.name.c_str(), d.description.c_str(),
                static_cast<unsigned long long>(d.total_bytes >> 20), static_cast<unsigned long long>(d.free_bytes >> 20));
  }
}

// --cache-redis: the engine opens the shared tier once it knows its state layout; each
// model and layout gets its own keys (hearth:<scope>:...).
void SetUpSharedTier(ServeFlags& f) {
  if (f.cache_redis.empty()) return;
  const std::string url = f.cache_redis;
  const int timeout_ms = f.cache_redis_timeout_ms;
  f.engine.open_shared_tier = [url, timeout_ms](const std::string& scope) -> StatusOr<std::shared_ptr<cache::SharedStore>> {
    cache::RedisOptions o;
    o.url = url;
    o.command_timeout_ms = timeout_ms;
    o.key_prefix = "hearth:" + scope + ":";
    auto store = cache::OpenRedisStore(o);
    if (!store.ok()) return store.status();
    return std::shared_ptr<cache::SharedStore>(std::move(*store));
  };
}

int RunServe(ServeFlags f) {
  engine::InitBackend(f.verbose);
  f.engine.verbose = f.verbose;
  f.engine.context.n_seq_max = f.engine.n_parallel + f.cache_sequences;
  f.engine.cache_ram_bytes = f.cache_ram_mib << 20;
  f.engine.cache_pin_bytes = f.cache_pin_mib ? std::min(*f.cache_pin_mib, f.cache_ram_mib) << 20 : f.engine.cache_ram_bytes / 2;
  f.engine.cache_disk_bytes = f.cache_disk_mib << 20;
  SetUpSharedTier(f);
  // Measured before the model loads, so free memory still includes what its weights take.
  auto memory = engine::MeasureContextMemory(f.model_path, f.model, f.engine.context);
  auto model = engine::Model::Load(f.model_path, f.model);
  if (!model.ok()) return Fail(model.status());
  if (Status s = SizeContext(f, memory, (*model)->info()); !s.ok()) return Fail(s);
  std::string override_template;
  if (!f.chat_template_file.empty()) {
    std::ifstream in(f.chat_template_file);
    if (!in) return Fail(NotFound("cannot read chat template file " + f.chat_template_file));
    std::stringstream ss;
    ss << in.rdbuf();
    override_template = ss.str();
  }
  auto tmpl = engine::ChatTemplate::Create(**model, override_template);
  if (!tmpl.ok()) return Fail(tmpl.status());
  const auto& info = (*model)->info();
  if (f.http.model_alias.empty()) f.http.model_alias = std::filesystem::path(f.model_path).stem().string();

  f.engine.cache_namespace = info.fingerprint;
  server::EngineLoop loop(**model, f.engine);
  if (Status s = loop.Open(); !s.ok()) return Fail(s);
  std::fprintf(stderr, "hearth: attention: flash attention %s (-fa %s), KV cache K %s V %s\n",
               loop.flash_attn() ? "on" : "off", engine::FlashAttnName(f.engine.context.flash_attn),
               f.engine.context.type_k.c_str(), f.engine.context.type_v.c_str());
  if (f.engine.shadow_feed != server::ShadowFeed::kOff && f.http.warm_ahead) {
    std::fprintf(stderr, "hearth: shadow prefill: %s (--shadow-prefill %s)\n", server::ShadowFeedName(loop.config().shadow_feed),
                 f.shadow_prefill.c_str());
  }
  server::HttpServer http(f.http, **model, **tmpl, loop);
  if (Status s = loop.Start(); !s.ok()) return Fail(s);
  if (Status s = http.Bind(); !s.ok()) return Fail(s);
  g_server = &http;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::fprintf(stderr, "hearth: serving %s (%s, %d layers, n_ctx %d, %d parallel) on http://%s:%d\n",
               f.http.model_alias.c_str(), info.arch.c_str(), info.n_layer, f.engine.context.n_ctx,
               f.engine.n_parallel, f.http.host.c_str(), http.port());
  // Scripts read this line to learn the port when --port 0 picked one.
  std::printf("listening on %s:%d\n", f.http.host.c_str(), http.port());
  std::fflush(stdout);
  http.Serve();
  g_server = nullptr;
  loop.Stop();
  std::fprintf(stderr, "hearth: stopped\n");
  return 0;
}

}  // namespace

void RegisterServe(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI and Anthropic APIs");
  AddServeFlags(*cmd, *f);
  cmd->callback([f] {
    if (Status s = FinishServeFlags(*f); !s.ok()) {
      std::fprintf(stderr, "hearth serve: %s\n", s.message().c_str());
      throw CLI::RuntimeError(2);
    }
    if (f->list_devices) {
      ListDevices(*f);
      return;
    }
    if (f->engine.context.n_ubatch > f->engine.context.n_batch) f->engine.context.n_ubatch = f->engine.context.n_batch;
    if (!f->engine.prefix_cache) {
      f->cache_sequences = 0;
      f->http.warm_ahead = false;
    }
    f->engine.context.n_seq_max = f->engine.n_parallel + f->cache_sequences;
    auto stabilizer = chat::Stabilizer::Parse(
        f->stabilize, f->stabilize_drop ? chat::StabilizeMode::kDrop : chat::StabilizeMode::kMoveToEnd);
    if (!stabilizer.ok()) {
      std::fprintf(stderr, "hearth serve: %s\n", stabilizer.status().message().c_str());
      throw CLI::RuntimeError(2);
    }
    f->http.stabilizer = std::move(*stabilizer);
    if (Status s = SetUpApiKeys(*f); !s.ok()) {
      std::fprintf(stderr, "hearth serve: %s\n", s.message().c_str());
      throw CLI::RuntimeError(2);
    }
    if (f->ctx_size && *f->ctx_size > 0) f->engine.context.n_ctx = *f->ctx_size;
    if (Status s = f->engine.context.Validate(); !s.ok()) {
      std::fprintf(stderr, "hearth serve: %s\n", s.message().c_str());
      throw CLI::RuntimeError(2);
    }
    // Every generation running or waiting in the engine's queue holds a worker; 16 more
    // for the short routes and connections still sending their request.
    f->http.n_http_threads = f->engine.n_parallel + f->engine.max_queued + 16;
    if (int rc = RunServe(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace hearth::app
