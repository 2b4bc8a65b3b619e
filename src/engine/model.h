// Model: a loaded GGUF model, its vocabulary and what the rest of hearth needs to know
// about it (architecture, layer kinds, chat template, fingerprint).
//
// Thread safety: a loaded Model is immutable; every const method may be called from any
// thread at once. Contexts created from it must not outlive it.
//
// Invariants:
//  1. info().layers.size() == info().n_layer.
//  2. info().fingerprint is a pure function of the file's bytes (FingerprintFile).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/types.h"

struct llama_model;
struct llama_vocab;

namespace hearth::engine {

struct LlamaModelDeleter {
  void operator()(llama_model* model) const;
};

// Initializes llama.cpp's backends once per process and routes its log to stderr at the
// given level. Safe to call more than once; the first call wins.
void InitBackend(bool verbose);

enum class LayerKind {
  kAttention,      // full causal attention: KV cache, trimmable at any position
  kSlidingWindow,  // attention over the last n_swa positions only
  kRecurrent,      // fixed-size state (SSM / Gated DeltaNet): cannot be trimmed back
};

const char* LayerKindName(LayerKind kind);

struct ModelInfo {
  std::string path;
  std::string arch;          // general.architecture, e.g. "qwen35"
  std::string description;   // llama.cpp's one-line description
  std::string name;          // general.name, may be empty
  int n_ctx_train = 0;
  int n_layer = 0;
  int n_embd = 0;
  int n_vocab = 0;
  int n_swa = 0;             // 0 when no layer uses a sliding window
  uint64_t n_params = 0;
  uint64_t size_bytes = 0;   // tensor bytes
  std::vector<LayerKind> layers;
  bool has_recurrent = false;
  std::string chat_template;  // embedded tokenizer.chat_template, may be empty
  std::string fingerprint;    // 32 hex digits: see FingerprintFile

  // Some layer cannot be trimmed back to an earlier position (recurrent or sliding
  // window): reusing a prefix then needs a partial state saved at its end.
  bool NeedsPartialStates() const;
  // Context::SaveSuffix saves less than a whole state: recurrent layers beside attention
  // ones, and no sliding window (which SaveSuffix refuses).
  bool HasSuffixStates() const;
};

// Where and how the weights load, as llama-server's -ngl, --no-mmap, --mlock, -dev, -sm,
// -mg, -ts and --rpc.
struct ModelOptions {
  int n_gpu_layers = -1;   // -1: all layers on the accelerator when one is built in
  bool use_mmap = true;
  bool use_mlock = false;  // keep the weights in RAM (no swapping or compression)
  // Backend devices to offload to, by name ("CUDA0", "Metal", "RPC[host:port]"); {"none"}:
  // none (CPU only); empty: every device found.
  std::vector<std::string> devices;
  std::string split_mode = "layer";  // across devices: "none", "layer", "row"
  int main_gpu = 0;                  // the device used whole when split_mode is "none"
  std::vector<float> tensor_split;   // share of the model per device, in device order
  // llama.cpp RPC servers ("host:port"); each becomes a device the model can offload to.
  std::vector<std::string> rpc_servers;

  // Errors: kInvalidArgument naming the bad field.
  Status Validate() const;
};

struct DeviceInfo {
  std::string name;  // what -dev takes
  std::string description;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// The devices llama.cpp found that a model can offload to (not the CPU), after adding
// `rpc_servers`' devices. Errors: as Model::Load for rpc_servers.
StatusOr<std::vector<DeviceInfo>> ListOffloadDevices(const std::vector<std::string>& rpc_servers);

class Model {
 public:
  // Loads the GGUF at `path`. Errors: kNotFound (no such file), kInvalidArgument (not a GGUF
  // file, truncated, unknown architecture, tensors missing, bad options), kUnimplemented
  // (options.rpc_servers without an RPC backend). Never aborts the process.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path, const ModelOptions& options);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const { return info_; }

  // Tokenizes `text`. `parse_special`: text like "<|im_start|>" becomes its control token
  // (true for rendered chat prompts; false for untrusted user text). Adds BOS when the
  // vocabulary asks for it and `add_bos` is true.
  std::vector<Token> Tokenize(std::string_view text, bool add_bos, bool parse_special) const;

  // The bytes of one token. `render_special`: control tokens print as their text.
  // The bytes may be an incomplete UTF-8 sequence; see Detokenizer for streams.
  std::string TokenPiece(Token token, bool render_special) const;

  // Concatenated pieces of `tokens`.
  std::string Detokenize(std::span<const Token> tokens, bool render_special) const;

  // Whether tokenizing rendered text (parse_special) in pieces split right before each
  // occurrence of `token`'s text gives the same tokens as tokenizing it whole: true for
  // a control token that strips no whitespace around it and whose text no other special
  // token's text contains (llama.cpp tokenizes the text between special tokens apart).
  bool SplitsTokenizationBefore(Token token) const;

  bool IsEndOfGeneration(Token token) const;
  // Control tokens (<|im_start|>, <think>, ...): template structure, not text.
  bool IsControl(Token token) const;
  bool IsValidToken(Token token) const { return token >= 0 && token < info_.n_vocab; }

  // For src/engine only.
  llama_model* raw() const { return model_.get(); }
  const llama_vocab* vocab() const { return vocab_; }

 private:
  Model(llama_model* model, ModelInfo info);

  std::unique_ptr<llama_model, LlamaModelDeleter> model_;
  const llama_vocab* vocab_;
  ModelInfo info_;
};

// XXH3-128, as 32 hex digits, of the file's size and bytes: all of them for files up to
// 24 MiB, else the first 8 MiB, 256 evenly spaced 64 KiB samples and the last 64 KiB.
// Different weights differ there (a fine-tune changes nearly every tensor); hashing every
// byte of a multi-gigabyte model took seconds at start-up. Errors: kNotFound, kDataLoss.
StatusOr<std::string> FingerprintFile(const std::string& path);

}  // namespace hearth::engine
