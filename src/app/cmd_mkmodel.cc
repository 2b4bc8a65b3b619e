// `hearth mkmodel`: writes a GGUF model with random weights (see mkmodel/mkmodel.h).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/commands.h"
#include "mkmodel/mkmodel.h"

namespace hearth::app {
namespace {

struct MkmodelFlags {
  std::string arch = "qwen35";
  std::string preset = "tiny";
  uint64_t seed = 1;
  std::string vocab;          // empty: the family's own (mkmodel::DefaultFiles)
  std::string chat_template;  // empty: the family's own
  std::string out;
};

std::string InModelsDir(std::string_view file) {
  return std::string(LlamaModelsDir()) + "/" + std::string(file);
}

std::vector<std::string> ArchNames() {
  std::vector<std::string> names;
  for (mkmodel::Arch a : mkmodel::kAllArchs) names.emplace_back(mkmodel::ArchName(a));
  return names;
}

[[noreturn]] void Fail(const Status& status) {
  std::fprintf(stderr, "hearth mkmodel: %s\n", status.message().c_str());
  throw CLI::RuntimeError(1);
}

void RunMkmodel(const MkmodelFlags& flags) {
  StatusOr<mkmodel::Arch> arch = mkmodel::ParseArch(flags.arch);
  if (!arch.ok()) Fail(arch.status());
  StatusOr<mkmodel::Preset> preset = mkmodel::ParsePreset(flags.preset);
  if (!preset.ok()) Fail(preset.status());

  mkmodel::Options options;
  options.arch = *arch;
  options.preset = *preset;
  options.seed = flags.seed;
  const mkmodel::FamilyFiles files = mkmodel::DefaultFiles(*arch);
  options.vocab_path = flags.vocab.empty() ? InModelsDir(files.vocab) : flags.vocab;
  options.template_path =
      flags.chat_template.empty() ? InModelsDir(files.chat_template) : flags.chat_template;
  options.out_path = flags.out;

  const auto start = std::chrono::steady_clock::now();
  StatusOr<mkmodel::WriteSummary> summary = mkmodel::WriteModelWithSummary(options);
  if (!summary.ok()) Fail(summary.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("%s: arch %s, preset %s, %llu parameters, %llu bytes, %.2f s\n",
              options.out_path.c_str(), flags.arch.c_str(), flags.preset.c_str(),
              static_cast<unsigned long long>(summary->n_params),
              static_cast<unsigned long long>(summary->n_bytes), seconds);
}

}  // namespace

void RegisterMkmodel(CLI::App& app) {
  auto flags = std::make_shared<MkmodelFlags>();
  CLI::App* cmd = app.add_subcommand(
      "mkmodel", "Write a GGUF model with random weights in a real architecture (for tests)");
  cmd->add_option("--arch", flags->arch, "Architecture (family)")
      ->check(CLI::IsMember(ArchNames()))
      ->capture_default_str();
  cmd->add_option("--preset", flags->preset,
                  "tiny (tests) or small (benchmarks: Qwen3.5-0.8B's shape or the family's nearest)")
      ->check(CLI::IsMember({"tiny", "small"}))
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed; the same seed gives the same file")
      ->capture_default_str();
  cmd->add_option("--vocab", flags->vocab,
                  "GGUF file whose tokenizer to copy (default: the family's own from llama.cpp's "
                  "models/, e.g. ggml-vocab-qwen35.gguf)");
  cmd->add_option("--template", flags->chat_template,
                  "Jinja chat template to embed (default: the family's own from llama.cpp's "
                  "models/templates/, e.g. Qwen3.5-4B.jinja)");
  cmd->add_option("--out", flags->out, "Output .gguf path")->required();
  cmd->callback([flags] { RunMkmodel(*flags); });
}

}  // namespace hearth::app
