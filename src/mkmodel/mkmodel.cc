#include "mkmodel/mkmodel.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "mkmodel/model_spec.h"
#include "mkmodel/tensor_writer.h"
#include "mkmodel/vocab_edit.h"

namespace hearth::mkmodel {
namespace {

constexpr uint32_t kFileTypeMostlyF16 = 1;  // llama_ftype LLAMA_FTYPE_MOSTLY_F16
constexpr const char* kChatTemplateKey = "tokenizer.chat_template";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";

struct GgufFree {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufFree>;

struct GgmlFree {
  void operator()(ggml_context* ctx) const { ggml_free(ctx); }
};
using GgmlPtr = std::unique_ptr<ggml_context, GgmlFree>;

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

StatusOr<std::string> ReadTemplate(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) {
    return NotFound("chat template file '" + path + "' does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return NotFound("cannot open chat template file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss("cannot read chat template file '" + path + "'");
  return text.str();
}

// Only the vocab file's tokenizer.* keys, except the chat template, which the caller sets.
StatusOr<GgufPtr> LoadTokenizerKeys(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) {
    return NotFound("vocab file '" + path + "' does not exist");
  }
  gguf_init_params params = {/*no_alloc=*/true, /*ctx=*/nullptr};
  GgufPtr vocab(gguf_init_from_file(path.c_str(), params));
  if (vocab == nullptr) return DataLoss("vocab file '" + path + "' is not a readable GGUF file");
  const int64_t tokens = gguf_find_key(vocab.get(), kTokensKey);
  if (tokens < 0 || gguf_get_kv_type(vocab.get(), tokens) != GGUF_TYPE_ARRAY ||
      gguf_get_arr_n(vocab.get(), tokens) == 0) {
    return InvalidArgument("vocab file '" + path + "' has no " + kTokensKey);
  }

  GgufPtr keys(gguf_init_empty());
  gguf_set_kv(keys.get(), vocab.get());
  std::vector<std::string> unwanted;
  for (int64_t i = 0; i < gguf_get_n_kv(keys.get()); ++i) {
    const std::string key = gguf_get_key(keys.get(), i);
    if (key.rfind("tokenizer.", 0) != 0 || key == kChatTemplateKey) unwanted.push_back(key);
  }
  for (const std::string& key : unwanted) gguf_remove_key(keys.get(), key.c_str());
  return keys;
}

int64_t VocabSize(const gguf_context* tokenizer) {
  return static_cast<int64_t>(gguf_get_arr_n(tokenizer, gguf_find_key(tokenizer, kTokensKey)));
}

GgufPtr BuildMetadata(const ModelSpec& spec, const Options& options, const gguf_context* tokenizer,
                      const std::string& chat_template) {
  GgufPtr meta(gguf_init_empty());
  gguf_context* m = meta.get();
  const std::string name = "hearth-random-" + std::string(ArchName(options.arch)) + "-" +
                           std::string(PresetName(options.preset));
  gguf_set_val_str(m, "general.architecture", spec.arch.c_str());
  gguf_set_val_str(m, "general.type", "model");
  gguf_set_val_str(m, "general.name", name.c_str());
  gguf_set_val_u32(m, "general.file_type", kFileTypeMostlyF16);
  for (const auto& [key, value] : spec.u32_keys) {
    gguf_set_val_u32(m, (spec.arch + "." + key).c_str(), value);
  }
  for (const auto& [key, value] : spec.f32_keys) {
    gguf_set_val_f32(m, (spec.arch + "." + key).c_str(), value);
  }
  for (const auto& [key, values] : spec.i32_array_keys) {
    gguf_set_arr_data(m, (spec.arch + "." + key).c_str(), GGUF_TYPE_INT32, values.data(),
                      values.size());
  }
  for (const auto& [key, value] : spec.bool_keys) {
    gguf_set_val_bool(m, (spec.arch + "." + key).c_str(), value);
  }
  for (const auto& [key, values] : spec.bool_array_keys) {
    // GGUF stores a bool as one byte.
    std::vector<int8_t> bytes(values.begin(), values.end());
    gguf_set_arr_data(m, (spec.arch + "." + key).c_str(), GGUF_TYPE_BOOL, bytes.data(), bytes.size());
  }
  gguf_set_kv(m, tokenizer);
  gguf_set_val_str(m, kChatTemplateKey, chat_template.c_str());

  // Tensor infos only: gguf_add_tensor copies the ggml_tensor header (name, type, shape)
  // and computes the aligned offsets; the data is streamed later.
  ggml_init_params params = {ggml_tensor_overhead() * spec.tensors.size(), nullptr,
                             /*no_alloc=*/true};
  GgmlPtr ctx(ggml_init(params));
  for (const TensorSpec& t : spec.tensors) {
    const ggml_type type = t.type == DType::kF16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    ggml_tensor* tensor =
        ggml_new_tensor(ctx.get(), type, static_cast<int>(t.ne.size()), t.ne.data());
    ggml_set_name(tensor, t.name.c_str());
    gguf_add_tensor(m, tensor);
  }
  return meta;
}

Status WriteFile(const std::string& path, const gguf_context* meta, const ModelSpec& spec,
                 uint64_t seed) {
  // Declared before the file: the stream may use it until fclose.
  std::vector<char> buffer(size_t{4} << 20);
  std::unique_ptr<std::FILE, FileClose> file(std::fopen(path.c_str(), "wb"));
  if (file == nullptr) {
    return InvalidArgument("cannot write '" + path + "': " + std::strerror(errno));
  }
  std::setvbuf(file.get(), buffer.data(), _IOFBF, buffer.size());

  if (!gguf_write_to_file_ptr(meta, file.get(), /*only_meta=*/true)) {
    return Internal("writing the GGUF header of '" + path + "' failed");
  }
  const size_t alignment = gguf_get_alignment(meta);
  for (const TensorSpec& t : spec.tensors) {
    Status s = WriteTensorData(file.get(), t, seed, alignment);
    if (!s.ok()) return Internal("'" + path + "': " + s.message());
  }
  std::FILE* f = file.release();
  if (std::fflush(f) != 0 || std::ferror(f) != 0) {
    std::fclose(f);
    return Internal("writing '" + path + "' failed: " + std::strerror(errno));
  }
  if (std::fclose(f) != 0) {
    return Internal("closing '" + path + "' failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Arch> ParseArch(std::string_view name) {
  std::string expected;
  for (Arch a : kAllArchs) {
    if (name == ArchName(a)) return a;
    expected += (expected.empty() ? "" : ", ") + std::string(ArchName(a));
  }
  return InvalidArgument("unknown architecture '" + std::string(name) + "'; expected one of " +
                         expected);
}

StatusOr<Preset> ParsePreset(std::string_view name) {
  for (Preset p : {Preset::kTiny, Preset::kSmall}) {
    if (name == PresetName(p)) return p;
  }
  return InvalidArgument("unknown preset '" + std::string(name) + "'; expected tiny or small");
}

std::string_view ArchName(Arch arch) {
  switch (arch) {
    case Arch::kQwen35: return "qwen35";
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kQwen3: return "qwen3";
    case Arch::kQwen3Next: return "qwen3next";
    case Arch::kGemma4: return "gemma4";
    case Arch::kGraniteHybrid: return "granitehybrid";
    case Arch::kGptOss: return "gpt-oss";
  }
  return "unknown";
}

FamilyFiles DefaultFiles(Arch arch) {
  switch (arch) {
    case Arch::kQwen35:
    case Arch::kQwen35Moe: return {"ggml-vocab-qwen35.gguf", "templates/Qwen3.5-4B.jinja"};
    // hearth's qwen3 models have carried the Qwen3.5 vocab since they were first made;
    // kept, so existing test files and their fingerprints stay as they were.
    case Arch::kQwen3: return {"ggml-vocab-qwen35.gguf", "templates/Qwen-Qwen3-0.6B.jinja"};
    // Qwen3-Next kept Qwen2/Qwen3's 151k BPE vocab (pre-tokenizer "qwen2"); its chat
    // template is Qwen3's (think blocks, <tool_call> JSON), which the 0.6B file ships.
    case Arch::kQwen3Next: return {"ggml-vocab-qwen2.gguf", "templates/Qwen-Qwen3-0.6B.jinja"};
    case Arch::kGemma4: return {"ggml-vocab-gemma-4.gguf", "templates/google-gemma-4-31B-it.jinja"};
    case Arch::kGraniteHybrid: return {"ggml-vocab-llama-bpe.gguf", "templates/ibm-granite-granite-4.0.jinja"};
    case Arch::kGptOss: return {"ggml-vocab-llama-bpe.gguf", "templates/openai-gpt-oss-120b.jinja"};
  }
  return {"", ""};
}

std::string_view PresetName(Preset preset) {
  switch (preset) {
    case Preset::kTiny: return "tiny";
    case Preset::kSmall: return "small";
  }
  return "unknown";
}

Status WriteModel(const Options& options) { return WriteModelWithSummary(options).status(); }

StatusOr<WriteSummary> WriteModelWithSummary(const Options& options) {
  if (options.out_path.empty()) return InvalidArgument("no output path given");
  StatusOr<GgufPtr> tokenizer = LoadTokenizerKeys(options.vocab_path);
  if (!tokenizer.ok()) return tokenizer.status();
  if (const std::optional<VocabEdit> edit = DescribeVocabEdit(options.arch)) {
    Status s = ApplyVocabEdit(*edit, tokenizer->get());
    if (!s.ok()) return InvalidArgument("vocab file '" + options.vocab_path + "': " + s.message());
  }
  StatusOr<std::string> chat_template = ReadTemplate(options.template_path);
  if (!chat_template.ok()) return chat_template.status();

  const ModelSpec spec = DescribeModel(options.arch, options.preset, VocabSize(tokenizer->get()));
  GgufPtr meta = BuildMetadata(spec, options, tokenizer->get(), *chat_template);

  // The pid keeps two processes writing the same model from sharing a temp file.
  const std::string temp_path = options.out_path + ".tmp." + std::to_string(::getpid());
  Status s = WriteFile(temp_path, meta.get(), spec, options.seed);
  std::error_code ec;
  if (s.ok()) {
    std::filesystem::rename(temp_path, options.out_path, ec);
    if (ec) s = InvalidArgument("cannot move '" + temp_path + "' to '" + options.out_path + "': " +
                                ec.message());
  }
  if (!s.ok()) {
    std::filesystem::remove(temp_path, ec);
    return s;
  }

  WriteSummary summary;
  summary.n_params = spec.NumParameters();
  summary.n_bytes = std::filesystem::file_size(options.out_path, ec);
  summary.n_tensors = static_cast<int64_t>(spec.tensors.size());
  return summary;
}

}  // namespace hearth::mkmodel
