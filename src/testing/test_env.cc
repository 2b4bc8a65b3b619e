#include "testing/test_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

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

std::string LlamaBinDir() { return HEARTH_LLAMA_BIN; }
std::string LlamaModelsDir() { return HEARTH_LLAMA_MODELS; }
std::string HearthBin() { return HEARTH_BIN; }

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

}  // namespace hearth::testing
