// Paths and shared fixtures for hearth's tests.
//
// The tiny random-weight models are made by ctest's `make_test_models` fixture
// (scripts/make-test-models.sh) before any test runs; tests that need one load it through
// LoadTestModel, which caches it for the whole test binary.
#pragma once

#include <string>
#include <string_view>

#include "engine/model.h"

namespace hearth::testing {

// <build>/testdata/tiny-<arch>.gguf
std::string TestModelPath(std::string_view arch);
// Directory with llama.cpp's own tools (llama-completion, llama-server, ...).
std::string LlamaBinDir();
// llama.cpp's source models/ directory (vocab files, templates/).
std::string LlamaModelsDir();
// The hearth executable.
std::string HearthBin();
// A fresh empty directory under the system temp dir, removed at process exit.
std::string MakeTempDir();

// Loads tiny-<arch>.gguf once per process. Fails the calling test (ADD_FAILURE) and
// returns nullptr when it cannot.
const engine::Model* LoadTestModel(std::string_view arch);

}  // namespace hearth::testing
