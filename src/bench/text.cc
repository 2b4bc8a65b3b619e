#include "bench/text.h"

#include <array>
#include <cctype>

namespace hearth::bench {
namespace {

constexpr std::array<std::string_view, 24> kSubjects = {
    "the server", "this function", "the cache", "our team", "the request", "each worker",
    "the scheduler", "a client", "the model", "the parser", "every thread", "the test",
    "the build", "that module", "the index", "the queue", "the config", "my patch",
    "the loader", "the database", "the old code", "the new version", "the user", "the tokenizer"};

constexpr std::array<std::string_view, 40> kVerbs = {
    "returns", "allocates", "reads", "writes", "checks", "skips", "retries", "handles",
    "caches", "splits", "merges", "parses", "renders", "locks", "releases", "updates",
    "ignores", "validates", "computes", "stores", "loads", "drops", "sends", "receives",
    "measures", "reports", "expects", "builds", "tracks", "compares", "copies", "moves",
    "rejects", "accepts", "restores", "flushes", "schedules", "prefetches", "resolves", "logs"};

constexpr std::array<std::string_view, 48> kObjects = {
    "the whole prompt", "a small buffer", "every message", "the last token", "two slots",
    "the response body", "a JSON object", "the error path", "a timeout", "the file handle",
    "an empty list", "the shared prefix", "each chunk", "the hash table", "a new request",
    "the output stream", "the previous state", "some extra memory", "the first batch",
    "the log line", "the exit code", "a partial reply", "the tool result", "the user input",
    "the summary", "a stale entry", "the old snapshot", "the config file", "a unit test",
    "the benchmark", "a long context", "the key order", "the retry count", "the checksum",
    "the main loop", "the worker pool", "a copy of it", "the return value", "the lock",
    "this branch", "the dependency", "a fresh sequence", "the template", "the API key",
    "a background task", "the sampling settings", "the stop strings", "the metrics"};

constexpr std::array<std::string_view, 32> kTails = {
    "before it starts", "when the queue is full", "after every turn", "in the hot path",
    "without blocking", "on the next request", "if the input is empty", "for each session",
    "under memory pressure", "at start-up", "while streaming", "as soon as possible",
    "in a single pass", "once per process", "on every platform", "by default",
    "in the background", "when it fails", "without a lock", "across restarts",
    "at the end of the prompt", "in the same order", "for long contexts", "twice",
    "too late", "correctly", "in constant time", "more often than needed",
    "with a small delay", "only on Linux", "in the right place", "since the last release"};

constexpr std::array<std::string_view, 16> kOpeners = {
    "However,", "In practice,", "Right now", "As far as I can tell,", "Apparently", "Also,",
    "On the other hand,", "Usually", "In the log,", "After the change,", "Sometimes",
    "For example,", "Unfortunately,", "In my tests,", "Meanwhile,", "Honestly,"};

constexpr std::array<std::string_view, 16> kAsks = {
    "Can you explain why", "Could you check whether", "Please find out why",
    "I would like to know if", "Can you fix the bug where", "Help me understand how",
    "Why does it happen that", "Is it expected that", "Could you make sure that",
    "Please refactor the code so that", "Can you write a test showing that",
    "Tell me whether", "Figure out if", "Explain in detail how", "Check if it is true that",
    "I am not sure whether"};

constexpr std::array<std::string_view, 40> kNameParts = {
    "prefix", "cache", "token", "buffer", "request", "session", "state", "slot", "batch",
    "queue", "parser", "config", "result", "index", "entry", "node", "tree", "block",
    "count", "size", "length", "offset", "limit", "path", "file", "line", "value", "key",
    "hash", "seed", "model", "tool", "message", "stream", "chunk", "worker", "timer",
    "reply", "usage", "score"};

constexpr std::array<std::string_view, 20> kDirs = {
    "src", "src/cache", "src/server", "src/engine", "lib", "tests", "tools", "src/api",
    "pkg/store", "app/models", "internal/http", "scripts", "src/util", "core", "src/bench",
    "examples", "docs", "src/io", "include", "services/auth"};

constexpr std::array<std::string_view, 12> kCppTypes = {
    "int", "size_t", "bool", "std::string", "double", "uint64_t", "Status", "const Node*",
    "std::vector<int>", "float", "Token", "Entry&"};

std::string Capitalize(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

std::string Sentence(Rng& rng) {
  std::string s;
  if (rng.Chance(0.3)) s += std::string(rng.Pick<std::string_view>(kOpeners)) + " ";
  s += std::string(rng.Pick<std::string_view>(kSubjects)) + " ";
  s += std::string(rng.Pick<std::string_view>(kVerbs)) + " ";
  s += std::string(rng.Pick<std::string_view>(kObjects));
  if (rng.Chance(0.7)) s += " " + std::string(rng.Pick<std::string_view>(kTails));
  if (rng.Chance(0.35)) {
    s += rng.Chance(0.5) ? ", but " : ", and ";
    s += std::string(rng.Pick<std::string_view>(kSubjects)) + " ";
    s += std::string(rng.Pick<std::string_view>(kVerbs)) + " ";
    s += std::string(rng.Pick<std::string_view>(kObjects));
  }
  if (rng.Chance(0.15)) s += " (about " + std::to_string(rng.Range(2, 4096)) + " ms)";
  s += rng.Chance(0.1) ? "!" : ".";
  return Capitalize(std::move(s));
}

std::string CppFunction(Rng& rng) {
  std::string name = Identifier(rng, true);
  std::string a = Identifier(rng, false), b = Identifier(rng, false);
  std::string ta(rng.Pick<std::string_view>(kCppTypes)), tb(rng.Pick<std::string_view>(kCppTypes));
  std::string s = std::string(rng.Pick<std::string_view>(kCppTypes)) + " " + name + "(" + ta + " " + a +
                  ", " + tb + " " + b + ") {\n";
  const int n = rng.Range(2, 6);
  for (int i = 0; i < n; ++i) {
    switch (rng.Range(0, 4)) {
      case 0: s += "  if (" + a + " == nullptr) return " + Identifier(rng, true) + "(\"" + Sentence(rng) + "\");\n"; break;
      case 1: s += "  for (size_t i = 0; i < " + b + ".size(); ++i) " + a + " += " + b + "[i];\n"; break;
      case 2: s += "  auto " + Identifier(rng, false) + " = " + Identifier(rng, true) + "(" + a + ", " +
                   std::to_string(rng.Range(0, 512)) + ");\n"; break;
      case 3: s += "  // " + Sentence(rng) + "\n"; break;
      default: s += "  " + b + "." + Identifier(rng, false) + " = " + a + "->" + Identifier(rng, false) + ";\n"; break;
    }
  }
  s += "  return " + a + ";\n}\n\n";
  return s;
}

std::string PyFunction(Rng& rng) {
  std::string a = Identifier(rng, false), b = Identifier(rng, false);
  std::string s = "def " + Identifier(rng, false) + "(" + a + ", " + b + "=None):\n";
  if (rng.Chance(0.5)) s += "    \"\"\"" + Sentence(rng) + "\"\"\"\n";
  const int n = rng.Range(2, 6);
  for (int i = 0; i < n; ++i) {
    switch (rng.Range(0, 3)) {
      case 0: s += "    if " + b + " is None:\n        " + b + " = {}\n"; break;
      case 1: s += "    for item in " + a + ":\n        " + b + "[item." + Identifier(rng, false) + "] = item\n"; break;
      case 2: s += "    " + Identifier(rng, false) + " = " + Identifier(rng, false) + "(" + a + ", " +
                   std::to_string(rng.Range(0, 99)) + ")\n"; break;
      default: s += "    # " + Sentence(rng) + "\n"; break;
    }
  }
  s += "    return " + b + "\n\n\n";
  return s;
}

}  // namespace

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int Rng::Range(int lo, int hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int>(Next() % span);
}

bool Rng::Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  Rng r(a ^ 0x5851f42d4c957f2dull);
  uint64_t h = r.Next();
  for (uint64_t v : {b, c, d}) {
    Rng s(h ^ (v * 0x2545f4914f6cdd1dull + 1));
    h = s.Next();
  }
  return h;
}

int EstimateTokens(std::string_view text) {
  // Calibrated on the Qwen3.5 vocabulary: common English words are one token, long
  // identifiers and numbers split, each punctuation mark and indentation run is one.
  double n = 0;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isalpha(c)) {
      size_t j = i;
      while (j < text.size() && (std::isalpha(static_cast<unsigned char>(text[j])))) ++j;
      const size_t len = j - i;
      n += len <= 7 ? 1.0 : 1.0 + static_cast<double>(len - 7) / 5.0;
      i = j;
    } else if (std::isdigit(c)) {
      size_t j = i;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      n += static_cast<double>(j - i + 2) / 3.0;
      i = j;
    } else if (c == ' ') {
      size_t j = i;
      while (j < text.size() && text[j] == ' ') ++j;
      if (j - i > 1) n += 1;  // indentation; single spaces ride on the next word
      i = j;
    } else {
      n += 1;
      ++i;
    }
  }
  return static_cast<int>(n + 0.5);
}

std::string Prose(Rng& rng, int n_tokens) {
  std::string out;
  int n = 0, in_paragraph = 0;
  do {
    std::string s = Sentence(rng);
    n += EstimateTokens(s) + 1;
    if (!out.empty()) out += (in_paragraph >= rng.Range(3, 6)) ? "\n\n" : " ";
    if (out.ends_with("\n\n")) in_paragraph = 0;
    out += s;
    ++in_paragraph;
  } while (n < n_tokens);
  return out;
}

std::string UserRequest(Rng& rng, int n_tokens) {
  std::string ask = std::string(rng.Pick<std::string_view>(kAsks)) + " " +
                    std::string(rng.Pick<std::string_view>(kSubjects)) + " " +
                    std::string(rng.Pick<std::string_view>(kVerbs)) + " " +
                    std::string(rng.Pick<std::string_view>(kObjects)) + " " +
                    std::string(rng.Pick<std::string_view>(kTails)) + "?";
  const int rest = n_tokens - EstimateTokens(ask);
  if (rest < 8) return ask;
  return Prose(rng, rest) + "\n\n" + ask;
}

std::string Code(Rng& rng, int n_tokens, bool python) {
  std::string out = python ? "import os\nimport json\n\n\n" : "#include <string>\n#include <vector>\n\n";
  while (EstimateTokens(out) < n_tokens) out += python ? PyFunction(rng) : CppFunction(rng);
  // Whole functions overshoot small sizes; drop trailing lines while still long enough.
  while (true) {
    const size_t cut = out.rfind('\n', out.size() >= 2 ? out.size() - 2 : 0);
    if (cut == std::string::npos || EstimateTokens(std::string_view(out).substr(0, cut + 1)) < n_tokens) break;
    out.resize(cut + 1);
  }
  return out;
}

std::string SourcePath(Rng& rng) {
  const char* ext = rng.Chance(0.5) ? ".cc" : (rng.Chance(0.5) ? ".py" : ".h");
  return std::string(rng.Pick<std::string_view>(kDirs)) + "/" + Identifier(rng, false) + ext;
}

std::string Identifier(Rng& rng, bool camel) {
  std::string a(rng.Pick<std::string_view>(kNameParts)), b(rng.Pick<std::string_view>(kNameParts));
  if (!camel) return a + "_" + b;
  return Capitalize(a) + Capitalize(b);
}

std::string HexId(Rng& rng, int n_digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n_digits; ++i) s += kHex[rng.Next() & 15];
  return s;
}

}  // namespace hearth::bench
