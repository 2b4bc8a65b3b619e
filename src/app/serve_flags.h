// ServeFlags: `hearth serve`'s command line, with llama-server's flags where they mean
// the same (-ngl, -fa, -ctk/-ctv, --mlock, --no-mmap, -c 0, --jinja, --reasoning-format,
// --chat-template-kwargs, -dev, -sm, -mg, -ts, --rpc, -np, -ub, ...), grouped in --help as
// llama-server groups them. llama-server flags hearth does not support are refused by
// name with the reason, never ignored.
//
// Thread safety: start-up only.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model.h"
#include "server/engine_loop.h"
#include "server/http_server.h"

namespace hearth::app {

// llama-server's -b and -ub defaults, hearth serve's too.
inline constexpr int kLlamaServerBatch = 2048;
inline constexpr int kLlamaServerUbatch = 512;

struct ServeFlags {
  std::string model_path;
  engine::ModelOptions model;
  std::string chat_template_file;
  server::HttpConfig http;
  std::vector<std::string> api_keys;  // --api-key
  std::string api_key_file;
  server::EngineConfig engine;
  int n_predict = -1;           // -n: -1 unlimited (see ChatDefaults::max_tokens)
  std::optional<int> ctx_size;  // -c; unset: sized from the model and memory; 0: the model's own
  std::vector<std::string> stabilize;
  bool stabilize_drop = false;
  int cache_sequences = 2;
  size_t cache_ram_mib = 2048;
  std::optional<size_t> cache_pin_mib;  // unset: half of --cache-ram
  size_t cache_disk_mib = 16384;
  std::string cache_redis;  // --cache-redis: the shared tier's Redis URL; empty: none
  int cache_redis_timeout_ms = 2000;
  bool verbose = false;
  bool list_devices = false;
  bool jinja = true;  // --jinja: accepted, always on
  // Raw text of flags parsed after CLI11 (see Finish).
  std::string n_gpu_layers = "all";
  std::string flash_attn = "auto";
  std::string shadow_prefill = "auto";
  std::string chat_template_kwargs;
  std::string tensor_split;
  std::string devices;
  std::string rpc_servers;
  // llama-server flags given that hearth refuses, with why.
  std::map<std::string, std::string> unsupported_given;
};

// `args` with llama-server's multi-letter single-dash flags (-ngl, -fa, -ctk, -np, ...)
// after "serve" spelled as their long forms, which is how `cmd` knows them; the rest
// unchanged.
std::vector<std::string> ExpandLlamaServerFlags(std::vector<std::string> args);

// Adds the options to `cmd`, writing into `f` (which must outlive parsing).
void AddServeFlags(CLI::App& cmd, ServeFlags& f);

// After parsing: turns the raw flags into options and checks them. Errors:
// kInvalidArgument naming the flag (an unsupported llama-server flag included).
Status FinishServeFlags(ServeFlags& f);

}  // namespace hearth::app
