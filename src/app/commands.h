// The `hearth` command line: one Register function per subcommand.
//
// Each Register adds a subcommand to `app` and sets its callback; the callback returns
// through CLI::RuntimeError with a nonzero exit code when the command fails, after
// printing a message that says what went wrong.
#pragma once

#include <CLI/CLI.hpp>

namespace hearth::app {

void RegisterMkmodel(CLI::App& app);
void RegisterGenerate(CLI::App& app);
void RegisterServe(CLI::App& app);
void RegisterBench(CLI::App& app);

// Where llama.cpp's source keeps vocab files and chat templates (models/), known at build
// time; flags override it.
const char* LlamaModelsDir();

}  // namespace hearth::app
