// Paths and shared fixtures for hearth's tests.
//
// The tiny random-weight models are made by ctest's `make_test_models` fixture
// (scripts/make-test-models.sh) before any test runs; tests that need one load it through
// LoadTestModel, which caches it for the whole test binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_template.h"
#include "engine/model.h"

namespace hearth::testing {

// <build>/testdata/tiny-<arch>.gguf
std::string TestModelPath(std::string_view arch);
// A name (an arch, a template's) as a test parameter's name, which may hold only letters,
// digits and '_': every other character becomes '_' ("gpt-oss" -> "gpt_oss").
std::string TestParamName(std::string_view name);
// Directory with llama.cpp's own tools (llama-completion, llama-server, ...).
std::string LlamaBinDir();
// llama.cpp's source models/ directory (vocab files, templates/).
std::string LlamaModelsDir();
// The chat templates llama.cpp ships (templates/*.jinja), by name without the extension,
// sorted; and one of them's source ("" when it cannot be read).
std::vector<std::string> ShippedTemplateNames();
std::string ReadShippedTemplate(const std::string& name);
// The shipped templates of the families hearth makes test models for (Qwen3.5, Qwen3,
// Gemma 4, Granite 4, gpt-oss), and all the others. A sweep over every template
// instantiates both, as Families/ and Shipped/: `make test-asan` runs only Families/ of
// such a sweep, since the others run the same hearth code through other Jinja sources
// and cost most of that pass (docs/reliability.md, "Sanitizers").
std::vector<std::string> FamilyTemplateNames();
std::vector<std::string> OtherShippedTemplateNames();
// The hearth executable.
std::string HearthBin();
// The repository's root (tests/e2e/fixtures, ...).
std::string SourceDir();
// A fresh empty directory under the system temp dir, removed at process exit.
std::string MakeTempDir();

// Loads tiny-<arch>.gguf once per process. Fails the calling test (ADD_FAILURE) and
// returns nullptr when it cannot.
const engine::Model* LoadTestModel(std::string_view arch);
// The model's own chat template (the real Qwen3.5 one for the qwen35 models), made once
// per process. Fails the calling test and returns nullptr when it cannot.
const engine::ChatTemplate* LoadTestTemplate(std::string_view arch);

// `n` token ids drawn from [100, 50000], the same for the same seed: a prompt of ordinary
// text tokens for any of the test models (their vocabularies are all larger).
std::vector<engine::Token> RandomTokens(int n, uint32_t seed);
// `a` followed by `b`.
std::vector<engine::Token> Concat(std::vector<engine::Token> a, const std::vector<engine::Token>& b);

// How many greedy steps from `prompt` have a clear winner: top two logits more than
// kClearGap apart, decoding alone in a fresh context. Decoding in another batch sums in
// another order and moves logits by up to LogitTolerance (see below), which can flip a
// near-tie; a batching or caching bug (wrong
// position, wrong logits row, state shared between sequences) flips clear winners too.
// Compare greedy outputs only over these steps.
inline constexpr float kClearGap = 0.06f;
int ClearGreedySteps(const engine::Model& model, const std::vector<engine::Token>& prompt, int max_steps);

// Logits of one prompt computed along different paths (batch sizes, restored states)
// agree within max |a - b| <= LogitTolerance * (1 + max |a|). Without flash attention
// they differ by summation order only: 1e-3. With it, llama.cpp's CPU kernel accumulates
// V in f16 for fewer queries than a tile (a decode step, a short resumed suffix) and in
// f32 for a tile or more (a cold prefill): 5e-3 (2.6e-3 seen on the tiny qwen3 model).
// A wrong state (another position, another sequence's cells) moves logits by their own
// size, far beyond either.
float LogitTolerance(bool flash_attn);
::testing::AssertionResult LogitsClose(const std::vector<float>& a, const std::vector<float>& b, bool flash_attn);

}  // namespace hearth::testing
