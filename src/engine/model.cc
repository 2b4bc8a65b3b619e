#include "engine/model.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "engine/llama_params.h"
#include "engine/log_capture.h"
#include "gguf.h"
#include "llama.h"

namespace hearth::engine {
namespace {

int g_log_verbose = 0;
thread_local std::string* g_log_capture = nullptr;  // see log_capture.h
thread_local bool g_log_hold = false;                // ScopedLogCapture::Mode::kHold

void LogToStderr(ggml_log_level level, const char* text, void* /*user*/) {
  if (g_log_capture != nullptr) g_log_capture->append(text);
  if (g_log_hold && !g_log_verbose) return;
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN || g_log_verbose) {
    std::fputs(text, stderr);
  }
}

std::string MetaString(const llama_model* model, const std::string& key) {
  char buf[512];
  int n = llama_model_meta_val_str(model, key.c_str(), buf, sizeof(buf));
  if (n < 0) return "";
  return std::string(buf, static_cast<size_t>(std::min<int>(n, static_cast<int>(sizeof(buf)) - 1)));
}

// Layer kinds from the tensor names: a layer with SSM tensors is recurrent, otherwise it
// attends; attention layers are sliding-window when the model has a window and
// "<arch>.attention.sliding_window_pattern" marks them so. The key comes in two forms:
// an array with one flag per layer, true for sliding (Gemma 3n / 4: what the converters
// write from layer_types), or one number N, every Nth layer global (Gemma 3). Without it
// the architecture's default applies, as llama.cpp's loader sets it: gpt-oss's converter
// writes no pattern, and its layers alternate (period 2, the first one sliding); any
// other architecture's attention layers all slide.
std::vector<LayerKind> ReadLayerKinds(gguf_context* gguf, int n_layer, int n_swa, const std::string& arch) {
  std::vector<LayerKind> kinds(static_cast<size_t>(n_layer), LayerKind::kAttention);
  const int64_t n_tensors = gguf_get_n_tensors(gguf);
  for (int64_t i = 0; i < n_tensors; ++i) {
    std::string name = gguf_get_tensor_name(gguf, i);
    int layer = -1;
    char rest[128];
    if (std::sscanf(name.c_str(), "blk.%d.%127s", &layer, rest) != 2) continue;
    if (layer < 0 || layer >= n_layer) continue;
    if (std::string_view(rest).starts_with("ssm_")) kinds[static_cast<size_t>(layer)] = LayerKind::kRecurrent;
  }
  if (n_swa <= 0) return kinds;
  std::vector<bool> sliding(static_cast<size_t>(n_layer), true);
  if (arch == "gpt-oss") {
    for (int il = 0; il < n_layer; ++il) sliding[static_cast<size_t>(il)] = il % 2 == 0;
  }
  const int64_t key = gguf_find_key(gguf, (arch + ".attention.sliding_window_pattern").c_str());
  if (key >= 0 && gguf_get_kv_type(gguf, key) == GGUF_TYPE_ARRAY) {
    const gguf_type type = gguf_get_arr_type(gguf, key);
    const size_t n = std::min(gguf_get_arr_n(gguf, key), sliding.size());
    const auto* data = static_cast<const uint8_t*>(gguf_get_arr_data(gguf, key));
    const size_t width = type == GGUF_TYPE_BOOL ? 1 : 4;
    if (type == GGUF_TYPE_BOOL || type == GGUF_TYPE_INT32 || type == GGUF_TYPE_UINT32) {
      for (size_t il = 0; il < n; ++il) {
        bool any = false;
        for (size_t b = 0; b < width; ++b) any |= data[il * width + b] != 0;
        sliding[il] = any;
      }
    }
  } else if (key >= 0 && (gguf_get_kv_type(gguf, key) == GGUF_TYPE_UINT32 ||
                          gguf_get_kv_type(gguf, key) == GGUF_TYPE_INT32)) {
    const int every = gguf_get_kv_type(gguf, key) == GGUF_TYPE_UINT32
                          ? static_cast<int>(gguf_get_val_u32(gguf, key))
                          : gguf_get_val_i32(gguf, key);
    for (int il = 0; il < n_layer; ++il) sliding[static_cast<size_t>(il)] = every <= 0 || il % every != every - 1;
  }
  for (int il = 0; il < n_layer; ++il) {
    auto& kind = kinds[static_cast<size_t>(il)];
    if (kind == LayerKind::kAttention && sliding[static_cast<size_t>(il)]) kind = LayerKind::kSlidingWindow;
  }
  return kinds;
}

}  // namespace

ScopedLogCapture::ScopedLogCapture(Mode mode) : previous_(g_log_capture), previous_hold_(g_log_hold) {
  g_log_capture = &text_;
  g_log_hold = mode == Mode::kHold;
}
ScopedLogCapture::~ScopedLogCapture() {
  g_log_capture = previous_;
  g_log_hold = previous_hold_;
}

void InitBackend(bool verbose) {
  static std::once_flag once;
  std::call_once(once, [verbose] {
    g_log_verbose = verbose ? 1 : 0;
    llama_log_set(LogToStderr, nullptr);
    llama_backend_init();
  });
}

bool ModelInfo::NeedsPartialStates() const {
  return std::any_of(layers.begin(), layers.end(), [](LayerKind k) { return k != LayerKind::kAttention; });
}

bool ModelInfo::HasSuffixStates() const {
  return has_recurrent && n_swa == 0 && std::find(layers.begin(), layers.end(), LayerKind::kAttention) != layers.end();
}

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kSlidingWindow: return "sliding_window";
    case LayerKind::kRecurrent: return "recurrent";
  }
  return "unknown";
}

StatusOr<std::string> FingerprintFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound("cannot open " + path);
  const auto size = static_cast<uint64_t>(in.tellg());
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, &size, sizeof(size));
  // The head (GGUF header, metadata, tensor index and the first tensors), then evenly
  // spaced samples through the weights and the tail: at most 8 + 256 * 64 KiB + 64 KiB read
  // whatever the model's size (hashing every byte took seconds on big models).
  constexpr uint64_t kHead = 8u << 20, kSample = 64u << 10, kSamples = 256;
  std::vector<char> buf(kHead);
  bool failed = false;
  auto hash_range = [&](uint64_t at, uint64_t n) {
    n = std::min(n, size > at ? size - at : 0);
    if (n == 0) return;
    in.clear();
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    failed |= static_cast<uint64_t>(in.gcount()) != n;
    XXH3_128bits_update(state, buf.data(), static_cast<size_t>(in.gcount()));
  };
  if (size <= kHead + kSamples * kSample) {
    for (uint64_t at = 0; at < size; at += kHead) hash_range(at, kHead);
  } else {
    hash_range(0, kHead);
    const uint64_t stride = (size - kHead) / kSamples;
    for (uint64_t i = 0; i < kSamples; ++i) hash_range(kHead + i * stride, kSample);
    hash_range(size - kSample, kSample);
  }
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  if (failed) return DataLoss("read error while hashing " + path);
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string(hex);
}

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path, const ModelOptions& options) {
  InitBackend(false);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("model file not found: " + path);

  auto setup = LlamaModelParams(options);
  if (!setup.ok()) return setup.status();

  // Read the header first: a clear error for files that are not GGUF, and the tensor names
  // for the layer kinds.
  gguf_init_params gp{/*no_alloc=*/true, /*ctx=*/nullptr};
  gguf_context* gguf = gguf_init_from_file(path.c_str(), gp);
  if (gguf == nullptr) {
    return InvalidArgument(path + " is not a readable GGUF file (wrong format, or truncated header)");
  }

  llama_model* model = llama_model_load_from_file(path.c_str(), (*setup)->params);
  if (model == nullptr) {
    gguf_free(gguf);
    return InvalidArgument("llama.cpp could not load " + path +
                           " (unsupported architecture, missing or truncated tensors; see the log above)");
  }

  ModelInfo info;
  info.path = path;
  info.arch = MetaString(model, "general.architecture");
  info.name = MetaString(model, "general.name");
  char desc[256];
  llama_model_desc(model, desc, sizeof(desc));
  info.description = desc;
  info.n_ctx_train = llama_model_n_ctx_train(model);
  info.n_layer = llama_model_n_layer(model);
  info.n_embd = llama_model_n_embd(model);
  info.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  info.n_swa = llama_model_n_swa(model);
  info.n_params = llama_model_n_params(model);
  info.size_bytes = llama_model_size(model);
  info.layers = ReadLayerKinds(gguf, info.n_layer, info.n_swa, info.arch);
  gguf_free(gguf);
  for (LayerKind k : info.layers) info.has_recurrent |= (k == LayerKind::kRecurrent);
  if (llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) info.has_recurrent = true;
  if (const char* tmpl = llama_model_chat_template(model, nullptr)) info.chat_template = tmpl;

  StatusOr<std::string> fp = FingerprintFile(path);
  if (!fp.ok()) {
    llama_model_free(model);
    return fp.status();
  }
  info.fingerprint = *fp;
  return std::unique_ptr<Model>(new Model(model, std::move(info)));
}

Model::Model(llama_model* model, ModelInfo info)
    : model_(model), vocab_(llama_model_get_vocab(model)), info_(std::move(info)) {}

void LlamaModelDeleter::operator()(llama_model* model) const { llama_model_free(model); }

std::vector<Token> Model::Tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  const auto len = static_cast<int32_t>(text.size());
  std::vector<Token> out(text.size() + 4);
  int32_t n = llama_tokenize(vocab_, text.data(), len, out.data(), static_cast<int32_t>(out.size()),
                             add_bos, parse_special);
  if (n < 0) {
    out.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), len, out.data(), static_cast<int32_t>(out.size()), add_bos,
                       parse_special);
  }
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::string Model::TokenPiece(Token token, bool render_special) const {
  if (!IsValidToken(token)) return "";
  char buf[256];
  int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof(buf), 0, render_special);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, render_special);
  big.resize(static_cast<size_t>(std::max(n, 0)));
  return big;
}

std::string Model::Detokenize(std::span<const Token> tokens, bool render_special) const {
  std::string out;
  for (Token t : tokens) out += TokenPiece(t, render_special);
  return out;
}

bool Model::IsControl(Token token) const {
  return IsValidToken(token) && (llama_vocab_is_control(vocab_, token) ||
                                 (llama_vocab_get_attr(vocab_, token) & LLAMA_TOKEN_ATTR_USER_DEFINED) != 0);
}

bool Model::SplitsTokenizationBefore(Token token) const {
  if (!IsControl(token)) return false;
  if ((llama_vocab_get_attr(vocab_, token) & (LLAMA_TOKEN_ATTR_LSTRIP | LLAMA_TOKEN_ATTR_RSTRIP)) != 0) return false;
  const std::string text = TokenPiece(token, /*render_special=*/true);
  if (text.empty()) return false;
  for (Token t = 0; t < info_.n_vocab; ++t) {
    if (t == token || !IsControl(t)) continue;
    if (TokenPiece(t, /*render_special=*/true).find(text) != std::string::npos) return false;
  }
  return true;
}

bool Model::IsEndOfGeneration(Token token) const {
  return IsValidToken(token) && llama_vocab_is_eog(vocab_, token);
}

}  // namespace hearth::engine
