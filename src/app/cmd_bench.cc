// `hearth bench`: measure multi-turn reuse (and speed) of hearth or any other server.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "app/commands.h"
#include "bench/bench.h"

namespace hearth::app {
namespace {

struct BenchFlags {
  std::string url = "http://127.0.0.1:8080";
  std::vector<std::string> compare;
  std::vector<std::string> labels;
  std::string scenarios;
  std::string flavor = "openai";
  std::string alternate = "session";
  std::string replay_flavor;
  std::string sweep;
  std::string pressure;
  std::string diagnose;
  std::string probes;
  std::optional<int> max_tokens;
  int think_ms = 0;
  int user_think_ms = 0;
  std::optional<double> temperature = 0.0;
  std::vector<std::string> env;
  bool no_plots = false, no_turn_table = false, quiet = false, no_nonce = false;
  std::string nonce;
  bench::BenchConfig config;
};

[[noreturn]] void Usage(const std::string& message) {
  std::fprintf(stderr, "hearth bench: %s\n", message.c_str());
  throw CLI::RuntimeError(2);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// This process's command line, for the results ("hearth bench ...").
std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  bool first = true;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    if (first) arg = std::filesystem::path(arg).filename().string();
    const bool quote = arg.find_first_of(" '\"$") != std::string::npos;
    out += (first ? "" : " ") + (quote ? "'" + arg + "'" : arg);
    first = false;
    start = end + 1;
  }
  return out.empty() ? "hearth bench" : out;
}

std::string RandomNonce() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

bench::Flavor ParseFlavor(const std::string& s) {
  if (s == "openai") return bench::Flavor::kOpenAI;
  if (s == "anthropic") return bench::Flavor::kAnthropic;
  Usage("--flavor must be openai or anthropic, not '" + s + "'");
}

// The servers: --diagnose's one, or the URL and --compare's, named by --label.
void ResolveTargets(const BenchFlags& f, bench::BenchConfig& c) {
  std::vector<std::string> urls;
  c.probes = SplitList(f.probes);
  if (!c.probes.empty() && f.diagnose.empty()) Usage("--probe goes with --diagnose");
  if (!f.diagnose.empty()) {
    if (!f.compare.empty()) Usage("--diagnose takes one server; drop --compare");
    urls.push_back(f.diagnose);
  } else {
    urls.push_back(f.url);
    urls.insert(urls.end(), f.compare.begin(), f.compare.end());
  }
  if (f.labels.size() > urls.size()) Usage("more --label values than servers");
  for (size_t i = 0; i < urls.size(); ++i) c.targets.push_back({i < f.labels.size() ? f.labels[i] : "", urls[i]});
}

// How requests are sent: API flavor, order, sampling, pacing, reply length.
void ResolveRequests(const BenchFlags& f, bench::BenchConfig& c) {
  c.run.flavor = ParseFlavor(f.flavor);
  if (f.alternate != "session" && f.alternate != "turn") Usage("--alternate must be session or turn");
  c.run.alternate = f.alternate == "turn" ? bench::Alternate::kTurn : bench::Alternate::kSession;
  c.run.temperature = f.temperature;
  c.run.progress = !f.quiet;
  if (f.think_ms < 0) Usage("--think-ms must be 0 or more");
  c.run.think = std::chrono::milliseconds(f.think_ms);
  if (f.user_think_ms < 0) Usage("--user-think-ms must be 0 or more");
  c.run.user_think = std::chrono::milliseconds(f.user_think_ms);
  if (!f.replay_flavor.empty()) c.replay_flavor = ParseFlavor(f.replay_flavor);
  if (f.max_tokens) {
    c.spec.max_tokens = *f.max_tokens;
    c.replay_max_tokens = f.max_tokens;
  }
}

void ResolveSweep(const std::string& sweep, bench::BenchConfig& c) {
  for (const std::string& s : SplitList(sweep)) {
    try {
      c.sweep_sizes.push_back(std::stoi(s));
    } catch (...) {
      Usage("--sweep takes token counts like 256,1024,4096, not '" + s + "'");
    }
  }
}

// --pressure CONVERSATIONS:TOKENS, each a comma-separated list.
void ResolvePressure(const std::string& pressure, bench::BenchConfig& c) {
  const size_t colon = pressure.find(':');
  if (colon == std::string::npos) Usage("--pressure takes CONVERSATIONS:TOKENS, e.g. 8:2400 or 2,4,8:1024,4096");
  auto ints = [&](const std::string& list, std::vector<int>* out) {
    for (const std::string& s : SplitList(list)) {
      try {
        out->push_back(std::stoi(s));
      } catch (...) {
        Usage("--pressure takes numbers like 2,4,8:1024,4096, not '" + s + "'");
      }
      if (out->back() < 1) Usage("--pressure values must be >= 1");
    }
  };
  ints(pressure.substr(0, colon), &c.pressure_conversations);
  ints(pressure.substr(colon + 1), &c.pressure_lengths);
  if (c.pressure_conversations.empty() || c.pressure_lengths.empty()) Usage("--pressure needs both lists");
  if (c.pressure_turns < 2) Usage("--pressure-turns must be >= 2 (follow-ups are what is measured)");
}

// Sessions run when asked for, or when nothing else (replay, sweep, pressure) was.
void ResolveScenarios(const std::string& scenarios, bench::BenchConfig& c) {
  std::string scen = scenarios;
  if (scen.empty() && c.replay_path.empty() && c.sweep_sizes.empty() && c.pressure_conversations.empty()) scen = "chat";
  for (const std::string& s : SplitList(scen)) {
    if (s == "all") {
      c.scenarios = bench::AllScenarios();
      continue;
    }
    auto sc = bench::ParseScenario(s);
    if (!sc.ok()) Usage(sc.status().message());
    c.scenarios.push_back(*sc);
  }
}

// Turns the flags into a BenchConfig; exits with a usage error when they do not fit (the
// first misfit in the order below).
bench::BenchConfig Resolve(BenchFlags& f, const std::string& command_line) {
  bench::BenchConfig c = f.config;
  c.command_line = command_line;
  ResolveTargets(f, c);
  ResolveRequests(f, c);
  ResolveSweep(f.sweep, c);
  if (!f.pressure.empty()) ResolvePressure(f.pressure, c);
  ResolveScenarios(f.scenarios, c);
  for (const std::string& kv : f.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) Usage("--env takes KEY=VALUE, not '" + kv + "'");
    c.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.no_nonce) c.spec.nonce = f.nonce.empty() ? RandomNonce() : f.nonce;
  if (c.out_dir.empty()) c.out_dir = bench::FormatNow("bench-results/%Y%m%d-%H%M%S", /*utc=*/false);
  c.plots = !f.no_plots;
  c.print_turns = !f.no_turn_table;
  if (c.spec.n_turns < 1 || c.reps < 1 || c.spec.n_sessions < 1) Usage("--turns, --reps and --sessions must be >= 1");
  return c;
}

// The servers, and the sessions sent to them.
void AddSessionFlags(CLI::App* cmd, BenchFlags& f) {
  bench::BenchConfig& c = f.config;
  cmd->add_option("url", f.url, "server base URL")->capture_default_str();
  cmd->add_option("--compare", f.compare, "more servers to measure alternately, same workload");
  cmd->add_option("--label", f.labels, "names for the servers, in order (default: from /v1/models)");
  cmd->add_option("--scenario", f.scenarios, "comma-separated scenarios (default chat)");
  cmd->add_option("--turns", c.spec.n_turns, "turns (requests) per session")->capture_default_str();
  cmd->add_option("--sessions", c.spec.n_sessions, "sessions per scenario (interleaved: 8 unless given)")
      ->capture_default_str();
  cmd->add_option("--system-tokens", c.spec.system_tokens, "system prompt size")->capture_default_str();
  cmd->add_option("--user-tokens", c.spec.user_tokens, "size of each user message / tool result")->capture_default_str();
  cmd->add_option("--context", c.spec.context_tokens, "size messages so the last prompt is about this long");
  cmd->add_option("--max-tokens", f.max_tokens, "reply length (default 48; replay: cap)");
  cmd->add_option("--interrupt-every", c.spec.interrupt_every, "interrupt scenario: cut every Nth reply")
      ->capture_default_str();
  cmd->add_option("--interrupt-after", c.spec.interrupt_after, "...after this many streamed pieces")
      ->capture_default_str();
  cmd->add_option("--seed", c.spec.seed, "workload seed")->capture_default_str();
  cmd->add_option("--nonce", f.nonce, "text at the top of each first user message (default: random per run)");
  cmd->add_flag("--no-nonce", f.no_nonce, "no nonce: reruns send identical sessions (a server may remember them)");
  cmd->add_option("--reps", c.reps, "repetitions (different text, same shape)")->capture_default_str();
  cmd->add_option("--warmup", c.run.warmup, "untimed requests per server first")->capture_default_str();
  cmd->add_option("--depth-probe", c.depth_probe_tokens,
                  "tokens of one cold prompt per server before the scenarios, for TTFT÷ideal at depth (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--think-ms", f.think_ms,
                  "pause before each follow-up turn, from that session's last reply (a user reading, a tool running)")
      ->capture_default_str();
  cmd->add_option("--user-think-ms", f.user_think_ms,
                  "pause before each follow-up that adds a user message (a person reading the reply; "
                  "tool results go after --think-ms)")
      ->capture_default_str();
  cmd->add_option("--flavor", f.flavor, "API: openai or anthropic")->capture_default_str();
  cmd->add_option("--alternate", f.alternate, "with --compare: alternate by session or turn")->capture_default_str();
}

// What runs instead of sessions, or besides them: replay, sweep, pressure, diagnosis.
void AddModeFlags(CLI::App* cmd, BenchFlags& f) {
  bench::BenchConfig& c = f.config;
  cmd->add_option("--replay", c.replay_path, "JSONL of recorded request bodies to replay");
  cmd->add_option("--replay-flavor", f.replay_flavor, "shape of the replayed bodies (default: detect)");
  cmd->add_option("--sweep", f.sweep, "cold/warm sweep over prompt sizes, e.g. 256,1024,4096");
  cmd->add_flag("--sweep-cold-only", c.sweep_cold_only, "sweep: send each prompt once, cold (not again warm)");
  cmd->add_option("--pressure", f.pressure,
                  "memory pressure over CONVERSATIONS:TOKENS lists, e.g. 8:2400 or 2,4,8,16:1024,2048,4096");
  cmd->add_option("--pressure-turns", c.pressure_turns, "turns per pressure conversation")->capture_default_str();
  cmd->add_option("--device-cells", c.device_cells,
                  "the servers' KV cells (-c), for working set / device cells (default: from /props)");
  cmd->add_option("--diagnose", f.diagnose, "probe one server for each cache failure mode");
  cmd->add_option("--restart-cmd", c.restart_cmd,
                  "diagnose: shell command that restarts the server on the same cache and returns (restart probe)");
  cmd->add_option("--probe", f.probes, "diagnose: only these probes (comma-separated; default all)");
}

// How new tokens are counted, where results go, and how requests are sent.
void AddRequestFlags(CLI::App* cmd, BenchFlags& f) {
  bench::BenchConfig& c = f.config;
  cmd->add_option("--render-model", c.render.model_path,
                  "count new tokens with this model file's template and tokenizer (recommended)");
  cmd->add_option("--render-url", c.render.url, "else: server whose /apply-template and /tokenize count them");
  cmd->add_option("-o,--out", c.out_dir, "results folder (default bench-results/DATE-TIME)");
  cmd->add_option("--model", c.run.model, "model name in requests (default: the server's first model)");
  cmd->add_option("--api-key", c.run.api_key, "sent as Bearer and x-api-key");
  cmd->add_option("--timeout", c.run.timeout_s, "seconds one request may take")->capture_default_str();
  cmd->add_option("--temperature", f.temperature, "sampling temperature (default 0: greedy)");
  cmd->add_flag("--send-reasoning", c.run.send_reasoning, "send reasoning_content back with earlier replies");
  cmd->add_flag("--session-key", c.run.send_session_key,
                "name each session as prompt_cache_key / metadata.user_id, for a load balancer's affinity");
}

// What the results record and print.
void AddRecordFlags(CLI::App* cmd, BenchFlags& f) {
  bench::BenchConfig& c = f.config;
  cmd->add_option("--model-file", c.model_file, "model file to record in env.json (with its size)");
  cmd->add_option("--env", f.env, "KEY=VALUE to record in env.json (server flags, notes)");
  cmd->add_flag("--no-plots", f.no_plots, "skip the plots (SVG and PNG)");
  cmd->add_flag("--no-turn-table", f.no_turn_table, "do not print the per-turn table");
  cmd->add_flag("-q,--quiet", f.quiet, "no progress lines");
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure multi-turn reuse and speed of hearth or any OpenAI/Anthropic-style server");
  cmd->footer(
      "Scenarios: chat, chat-think, agent, interrupt, volatile, interleaved, grow, all (pressure: see --pressure).\n"
      "Per request it records TTFT, end-to-end time, decode tokens/s, prompt / reused / prefilled tokens and the\n"
      "tokens new in the request (rendered with --render-model, or a server's /apply-template and /tokenize),\n"
      "then prefilled / new.\n"
      "Examples:\n"
      "  hearth bench http://127.0.0.1:8080 --scenario chat,agent --turns 8\n"
      "  hearth bench http://127.0.0.1:8080 --compare http://127.0.0.1:8081 --label hearth --label llama-server\n"
      "  hearth bench --diagnose http://127.0.0.1:8081\n"
      "  hearth bench http://127.0.0.1:8080 --sweep 256,1024,4096\n"
      "  hearth bench http://127.0.0.1:8080 --pressure 2,4,8,16:1024,2048,4096 --device-cells 8192\n"
      "  hearth bench http://127.0.0.1:8080 --replay my-agent-log.jsonl");
  // In the order --help lists them.
  AddSessionFlags(cmd, *f);
  AddModeFlags(cmd, *f);
  AddRequestFlags(cmd, *f);
  AddRecordFlags(cmd, *f);
  cmd->callback([f] {
    bench::BenchConfig config = Resolve(*f, CommandLine());
    int rc = 1;
    try {  // the edge: a malformed replay file or server answer ends the run with a message
      rc = f->diagnose.empty() ? bench::RunBench(config) : bench::RunDiagnose(config);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hearth bench: %s\n", e.what());
    }
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace hearth::app
