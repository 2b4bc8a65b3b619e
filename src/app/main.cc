#include <cstdio>

#include "app/commands.h"

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
  CLI11_PARSE(app, argc, argv);
  return 0;
}
