#include "fuzz_env.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "mkmodel/mkmodel.h"

namespace hearth::fuzz {
namespace {

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "hearth fuzz: %s\n", why.c_str());
  std::abort();
}

std::string ModelPath() {
  if (const char* env = std::getenv("HEARTH_FUZZ_MODEL"); env != nullptr && *env != '\0') return env;
  const std::string path = HEARTH_FUZZ_MODEL_DEFAULT;
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  // The same options as scripts/make-test-models.sh, so it is the tests' tiny model.
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kQwen35;
  o.preset = mkmodel::Preset::kTiny;
  o.seed = 7;
  o.vocab_path = std::string(HEARTH_LLAMA_MODELS) + "/ggml-vocab-qwen35.gguf";
  o.template_path = std::string(HEARTH_LLAMA_MODELS) + "/templates/Qwen3.5-4B.jinja";
  o.out_path = path;
  if (Status s = mkmodel::WriteModel(o); !s.ok()) Die("cannot write " + path + ": " + s.ToString());
  return path;
}

}  // namespace

const engine::Model& TinyModel() {
  static const engine::Model* model = [] {
    engine::InitBackend(/*verbose=*/false);
    const std::string path = ModelPath();
    auto m = engine::Model::Load(path, {});
    if (!m.ok()) Die("cannot load " + path + ": " + m.status().ToString());
    return m->release();  // lives as long as the process
  }();
  return *model;
}

const engine::ChatTemplate& TinyTemplate() {
  static const engine::ChatTemplate* tmpl = [] {
    auto t = engine::ChatTemplate::Create(TinyModel(), "");
    if (!t.ok()) Die("cannot make the chat template: " + t.status().ToString());
    return t->release();
  }();
  return *tmpl;
}

}  // namespace hearth::fuzz
