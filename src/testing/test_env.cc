#include "testing/test_env.h"

#include <cmath>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

#include "engine/context.h"

namespace hearth::testing {
namespace {

struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

TempDirs& Temps() {
  static TempDirs t;
  return t;
}

}  // namespace

std::string TestModelPath(std::string_view arch) {
  return std::string(HEARTH_TESTDATA) + "/tiny-" + std::string(arch) + ".gguf";
}

std::string TestParamName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

std::string LlamaBinDir() { return HEARTH_LLAMA_BIN; }
std::string LlamaModelsDir() { return HEARTH_LLAMA_MODELS; }
std::string HearthBin() { return HEARTH_BIN; }

std::vector<std::string> ShippedTemplateNames() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(LlamaModelsDir() + "/templates")) {
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> FamilyTemplateNames() {
  return {"Qwen3.5-4B", "Qwen-Qwen3-0.6B", "google-gemma-4-31B-it", "ibm-granite-granite-4.0",
          "openai-gpt-oss-120b"};
}

std::vector<std::string> OtherShippedTemplateNames() {
  const std::vector<std::string> families = FamilyTemplateNames();
  std::vector<std::string> others;
  for (std::string& name : ShippedTemplateNames()) {
    if (std::find(families.begin(), families.end(), name) == families.end()) others.push_back(std::move(name));
  }
  return others;
}

std::string ReadShippedTemplate(const std::string& name) {
  std::ifstream in(LlamaModelsDir() + "/templates/" + name + ".jinja", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
std::string SourceDir() { return HEARTH_SOURCE_DIR; }

std::string MakeTempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "hearth-test-XXXXXX").string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const char* dir = mkdtemp(buf.data());
  if (dir == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return "/tmp";
  }
  Temps().dirs.emplace_back(dir);
  return dir;
}

const engine::Model* LoadTestModel(std::string_view arch) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<engine::Model>> models;
  std::lock_guard<std::mutex> lock(mu);
  auto it = models.find(std::string(arch));
  if (it != models.end()) return it->second.get();
  auto m = engine::Model::Load(TestModelPath(arch), {});
  if (!m.ok()) {
    ADD_FAILURE() << "cannot load test model " << TestModelPath(arch) << ": " << m.status().ToString();
    return nullptr;
  }
  const engine::Model* raw = m->get();
  models.emplace(std::string(arch), std::move(*m));
  return raw;
}

const engine::ChatTemplate* LoadTestTemplate(std::string_view arch) {
  const engine::Model* model = LoadTestModel(arch);
  if (model == nullptr) return nullptr;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<engine::ChatTemplate>> templates;
  std::lock_guard<std::mutex> lock(mu);
  auto it = templates.find(std::string(arch));
  if (it != templates.end()) return it->second.get();
  auto t = engine::ChatTemplate::Create(*model, "");
  if (!t.ok()) {
    ADD_FAILURE() << "cannot make the chat template of " << arch << ": " << t.status().ToString();
    return nullptr;
  }
  const engine::ChatTemplate* raw = t->get();
  templates.emplace(std::string(arch), std::move(*t));
  return raw;
}

std::vector<engine::Token> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<engine::Token> draw(100, 50000);
  std::vector<engine::Token> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) t = draw(rng);
  return tokens;
}

std::vector<engine::Token> Concat(std::vector<engine::Token> a, const std::vector<engine::Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int ClearGreedySteps(const engine::Model& model, const std::vector<engine::Token>& prompt, int max_steps) {
  engine::ContextOptions o;
  o.n_ctx = 1024;
  o.n_batch = 64;
  o.n_ubatch = 64;
  o.n_seq_max = 1;
  o.n_threads = 1;
  auto ctx = engine::Context::Create(model, o);
  if (!ctx.ok() || !(*ctx)->Prefill(0, prompt, 0, true).ok()) return 0;
  int index = (*ctx)->LastPrefillIndex();
  for (int step = 0; step < max_steps; ++step) {
    auto logits = (*ctx)->Logits(index);
    std::vector<float> v(logits.begin(), logits.end());
    if (v.size() < 2) return step;
    auto best = std::max_element(v.begin(), v.end());
    const auto token = static_cast<engine::Token>(best - v.begin());
    const float top = *best;
    *best = -1e30f;
    if (top - *std::max_element(v.begin(), v.end()) <= kClearGap) return step;
    if (model.IsEndOfGeneration(token)) return step + 1;
    engine::Batch b;
    index = b.Add(token, (*ctx)->SeqLength(0), 0, true);
    if (!(*ctx)->Decode(b).ok()) return step;
  }
  return max_steps;
}

float LogitTolerance(bool flash_attn) { return flash_attn ? 5e-3f : 1e-3f; }

::testing::AssertionResult LogitsClose(const std::vector<float>& a, const std::vector<float>& b, bool flash_attn) {
  if (a.empty() || a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  float diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return ::testing::AssertionFailure() << "non-finite logit at " << i;
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  const float bound = LogitTolerance(flash_attn) * (1 + scale);
  if (diff <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |diff| " << diff << " > " << bound;
}

}  // namespace hearth::testing
