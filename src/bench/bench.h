// hearth bench: measures multi-turn reuse of any OpenAI- or Anthropic-style server.
//
// The public face of src/bench/ for the command line (src/app/cmd_bench.cc):
//  - RunBench runs workloads (workload.h), a replay of recorded sessions, and/or the
//    cold/warm sweep against one server or several (--compare), then writes a results
//    folder (report.h) and prints a per-turn table and a Markdown summary.
//  - RunDiagnose runs one short probe per known cache failure mode against one server
//    and prints a verdict table.
//  - With a pressure grid, RunBench also runs each memory-pressure point (pressure.h) and
//    adds its table and plot.
//
// What is measured per request, and how "new tokens" are computed: results.h, render.h.
//
// Thread safety: call from one thread; both block until done.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/pressure.h"
#include "bench/runner.h"
#include "bench/workload.h"

namespace hearth::bench {

struct BenchConfig {
  std::vector<Target> targets;  // the server, then the --compare ones
  RenderSource render;          // how new tokens are counted (runner.h)
  RunOptions run;
  std::vector<Scenario> scenarios;
  WorkloadSpec spec;            // sizes, turns, seed; scenario and rep are set per run
  int reps = 1;
  std::string replay_path;
  std::optional<Flavor> replay_flavor;
  std::optional<int> replay_max_tokens;
  std::vector<int> sweep_sizes;
  bool sweep_cold_only = false;  // sweep prompts are not sent a second time, warm
  // Tokens of the depth probe sent to each server before the scenarios (Runner::DepthProbe);
  // 0: none, and no TTFT÷ideal at depth.
  int depth_probe_tokens = 256;
  // Memory pressure (pressure.h): every conversations × length pair of the grid, after the
  // scenarios; empty: none. Each point's turns are pressure_turns.
  std::vector<int> pressure_conversations;
  std::vector<int> pressure_lengths;
  int pressure_turns = 4;
  // The servers' KV cells (-c), for working set ÷ device cells; 0: from /props (llama-server
  // reports n_ctx), else unknown.
  int device_cells = 0;
  std::string out_dir;          // results folder
  bool plots = true;
  bool print_turns = true;
  std::string model_file;       // recorded in env.json with its size
  std::map<std::string, std::string> env;  // extra KEY=VALUE for env.json (server flags...)
  std::string command_line;
  std::string restart_cmd;      // diagnose: restarts the server (the restart probe, restart.h)
  std::vector<std::string> probes;  // diagnose: the probes to run; empty: all
};

// The current time through strftime `format`, in UTC or local time (dates in env.json,
// default results folder names).
std::string FormatNow(const char* format, bool utc);

// Returns the process exit code: 0 when the run finished (even if some requests failed:
// failures are results), 1 when it could not run.
int RunBench(const BenchConfig& config);

// REQUIRES: config.targets has exactly one target, the server to diagnose.
int RunDiagnose(const BenchConfig& config);

// Shared by both: writes the folder, plots, and prints where things are. Returns 0 or 1.
int FinishRun(const BenchConfig& config, const Runner& runner, const std::string& extra_markdown,
              const std::vector<PressurePoint>& pressure);

// config.device_cells, else the n_ctx a server's /props reports (`env` is
// Runner::Environment()), else nullopt.
std::optional<int> DeviceCells(const BenchConfig& config, const Json& env);

}  // namespace hearth::bench
