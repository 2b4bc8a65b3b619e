#include <cstdio>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/serve_flags.h"

namespace hearth::app {
const char* LlamaModelsDir() { return HEARTH_LLAMA_MODELS_DIR; }
}  // namespace hearth::app

int main(int argc, char** argv) {
  CLI::App app{"hearth: an LLM server for long multi-turn sessions that never recomputes "
               "what it has already seen"};
  app.require_subcommand(1);
  hearth::app::RegisterMkmodel(app);
  hearth::app::RegisterGenerate(app);
  hearth::app::RegisterServe(app);
  hearth::app::RegisterBench(app);
  // llama-server's -ngl, -fa, -ctk, ... as their long forms (serve_flags.h).
  std::vector<std::string> args = hearth::app::ExpandLlamaServerFlags({argv, argv + argc});
  std::vector<char*> expanded;
  for (auto& a : args) expanded.push_back(a.data());
  CLI11_PARSE(app, static_cast<int>(expanded.size()), expanded.data());
  return 0;
}
