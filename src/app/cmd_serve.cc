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
#include "engine/chat_template.h"
#include "engine/memory.h"
#include "engine/model.h"
#include "server/api_keys.h"
#include "server/context_size.h"
#include "server/engine_loop.h"
#include "server/http_server.h"

namespace hearth::app {
namespace {

struct ServeFlags {
  std::string model_path;
  std::string chat_template_file;
  server::HttpConfig http;
  std::vector<std::string> api_keys;  // --api-key
  std::string api_key_file;
  server::EngineConfig engine;
  std::optional<int> ctx_size;  // -c; unset: sized from the model and memory
  std::vector<std::string> stabilize;
  bool stabilize_drop = false;
  int cache_sequences = 2;
  size_t cache_ram_mib = 2048;
  std::optional<size_t> cache_pin_mib;  // unset: half of --cache-ram
  size_t cache_disk_mib = 16384;
  bool verbose = false;
};

server::HttpServer* g_server = nullptr;

void OnSignal(int) {
  if (g_server) g_server->Stop();
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
  auto secret = server::LoadNamespaceSecret(f.engine.prefix_cache ? f.engine.cache_dir : "");
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
    std::fprintf(stderr, "hearth: memory: KV %s/cell (%s), recurrent %s/sequence (%s for %d)%s\n",
                 FormatBytes(kv).c_str(), FormatBytes(kv * choice.n_ctx).c_str(), FormatBytes(recurrent).c_str(),
                 FormatBytes(recurrent * n_seq).c_str(), n_seq, pools.c_str());
  }
  if (f.engine.prefix_cache) {
    const std::string disk = f.engine.cache_dir.empty()
                                 ? std::string("no disk tier (no --cache-dir)")
                                 : "disk tier " + FormatBytes(static_cast<double>(f.engine.cache_disk_bytes)) + " in " +
                                       f.engine.cache_dir;
    std::fprintf(stderr, "hearth: cache tiers: RAM %s (host), %s\n",
                 FormatBytes(static_cast<double>(f.engine.cache_ram_bytes)).c_str(), disk.c_str());
  }
  return Status::Ok();
}

int RunServe(ServeFlags f) {
  engine::InitBackend(f.verbose);
  f.engine.verbose = f.verbose;
  f.engine.context.n_seq_max = f.engine.n_parallel + f.cache_sequences;
  f.engine.cache_ram_bytes = f.cache_ram_mib << 20;
  f.engine.cache_pin_bytes = f.cache_pin_mib ? std::min(*f.cache_pin_mib, f.cache_ram_mib) << 20 : f.engine.cache_ram_bytes / 2;
  f.engine.cache_disk_bytes = f.cache_disk_mib << 20;
  // Measured before the model loads, so free memory still includes what its weights take.
  auto memory = engine::MeasureContextMemory(f.model_path, {}, f.engine.context);
  auto model = engine::Model::Load(f.model_path, {});
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

  f.engine.cache_namespace = info.fingerprint + "|kv-f16";
  server::EngineLoop loop(**model, f.engine);
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
  f->engine.n_parallel = 2;
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI and Anthropic APIs");
  cmd->add_option("-m,--model", f->model_path, "GGUF model file")->required();
  cmd->add_option("--host", f->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", f->http.port, "port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", f->api_keys,
                  "require a key (Bearer or x-api-key); repeat for several clients, each with its own cache namespace "
                  "(visible to local users in ps: prefer --api-key-file or HEARTH_API_KEY)");
  cmd->add_option("--api-key-file", f->api_key_file,
                  "file of API keys, one per line ('#' comments); must not be readable by group or others");
  cmd->add_flag("--cors", f->http.cors, "allow cross-origin browser requests");
  cmd->add_option("--alias", f->http.model_alias, "model id reported to clients (default: file name)");
  cmd->add_option("--chat-template-file", f->chat_template_file, "Jinja template to use instead of the model's");
  cmd->add_option("-c,--ctx-size", f->ctx_size,
                  "KV cells shared by all sequences (default: the model's training context, capped by free memory)");
  cmd->add_option("-P,--parallel", f->engine.n_parallel, "requests decoded together")->capture_default_str();
  cmd->add_option("--cache-seqs", f->cache_sequences, "idle conversations kept on the device")->capture_default_str();
  cmd->add_option("--cache-ram", f->cache_ram_mib, "MiB of host RAM for cached states")->capture_default_str();
  cmd->add_option("--cache-pin-minutes", f->engine.cache_pin_minutes,
                  "keep each conversation active this recently in RAM before idle ones (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cache-pin-budget", f->cache_pin_mib, "MiB of the RAM tier that pins may hold (default: half of --cache-ram)");
  cmd->add_option("--cache-dir", f->engine.cache_dir, "directory for the disk tier (survives restarts)");
  cmd->add_option("--cache-disk", f->cache_disk_mib, "MiB of disk for cached states")->capture_default_str();
  cmd->add_option("-b,--batch-size", f->engine.context.n_batch, "tokens per decode step")->capture_default_str();
  cmd->add_option("--ubatch-size", f->engine.context.n_ubatch, "physical micro-batch")->capture_default_str();
  cmd->add_option("-t,--threads", f->engine.context.n_threads, "CPU threads (0: all)");
  cmd->add_option("--max-queue", f->engine.max_queued, "requests that may wait for a slot before 503")
      ->capture_default_str();
  cmd->add_option("--max-body", f->http.max_body_bytes, "largest request body in bytes")->capture_default_str();
  cmd->add_flag("-v,--verbose", f->verbose,
                "log llama.cpp's messages, why shadows were dropped, and the earlier text a volatile span replaced");
  cmd->add_option("--stabilize", f->stabilize,
                  "move per-request spans out of the cacheable prefix: uuid, ulid, timestamp, claude-billing, re:REGEX")
      ->delimiter(',');
  cmd->add_flag("--stabilize-drop", f->stabilize_drop, "drop matched spans instead of moving them to the end");
  cmd->add_flag("!--no-warm-ahead", f->http.warm_ahead, "do not prepare the next turn while idle");
  cmd->add_flag("!--no-cache", f->engine.prefix_cache,
                "no prefix cache at all (every prompt computed in full): a baseline for measuring the cache");
  cmd->callback([f] {
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
    if (f->ctx_size) f->engine.context.n_ctx = *f->ctx_size;
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
