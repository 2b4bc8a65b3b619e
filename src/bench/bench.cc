#include "bench/bench.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>

#include "bench/report.h"
#include "bench/side_by_side.h"
#include "bench/text.h"

namespace hearth::bench {
namespace {

Json ModelFileInfo(const std::string& path) {
  Json j{{"path", path}};
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) j["bytes"] = size;
  return j;
}

Json BuildEnvironment(const BenchConfig& c, const Runner& runner) {
  Json env = runner.Environment();
  env["date"] = FormatNow("%Y-%m-%dT%H:%M:%SZ", /*utc=*/true);
  env["host"] = HostInfo();
  env["command"] = c.command_line;
  std::string model_file = c.model_file;
  if (model_file.empty()) {
    // llama-server says where its model is.
    for (const Json& s : env["servers"]) {
      const Json& props = s["info"].value("props", Json::object());
      if (props.is_object() && props.contains("model_path") && props["model_path"].is_string()) {
        model_file = props["model_path"].get<std::string>();
        break;
      }
    }
  }
  if (!model_file.empty()) env["model_file"] = ModelFileInfo(model_file);
  Json spec;
  spec["turns"] = c.spec.n_turns;
  spec["sessions"] = c.spec.n_sessions;
  spec["system_tokens"] = c.spec.system_tokens;
  spec["user_tokens"] = c.spec.user_tokens;
  spec["context_tokens"] = c.spec.context_tokens;
  spec["max_tokens"] = c.spec.max_tokens;
  spec["interrupt_every"] = c.spec.interrupt_every;
  spec["interrupt_after"] = c.spec.interrupt_after;
  spec["seed"] = c.spec.seed;
  spec["reps"] = c.reps;
  if (!c.pressure_conversations.empty()) {
    spec["pressure"] = {{"conversations", c.pressure_conversations},
                        {"lengths", c.pressure_lengths},
                        {"turns", c.pressure_turns},
                        {"device_cells", c.device_cells > 0 ? Json(c.device_cells) : Json(nullptr)}};
  }
  env["workload"] = spec;
  for (const auto& [k, v] : c.env) env["extra"][k] = v;
  return env;
}

std::vector<std::string> Labels(const Runner& runner) {
  std::vector<std::string> out;
  for (const Target& t : runner.targets()) out.push_back(t.label);
  return out;
}

}  // namespace

std::string FormatNow(const char* format, bool utc) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  if (utc) {
    gmtime_r(&t, &tm);
  } else {
    localtime_r(&t, &tm);
  }
  char buf[128];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::optional<int> DeviceCells(const BenchConfig& config, const Json& env) {
  if (config.device_cells > 0) return config.device_cells;
  for (const Json& s : env.value("servers", Json::array())) {
    const Json props = s.value("info", Json::object()).value("props", Json::object());
    if (!props.is_object()) continue;
    const Json gen = props.value("default_generation_settings", Json::object());
    for (const Json* j : {&props, &gen}) {
      if (j->is_object() && j->contains("n_ctx") && (*j)["n_ctx"].is_number_integer()) return (*j)["n_ctx"].get<int>();
    }
  }
  return std::nullopt;
}

int FinishRun(const BenchConfig& config, const Runner& runner, const std::string& extra_markdown,
              const std::vector<PressurePoint>& pressure) {
  const std::vector<TurnRow>& rows = runner.rows();
  std::string summary = "# hearth bench results\n\n" + std::string("Command: `") + config.command_line + "`\n\n";
  if (!extra_markdown.empty()) summary += extra_markdown + "\n";
  summary += SummaryMarkdown(rows, Labels(runner));
  if (const std::string side = SideBySideTable(rows, Labels(runner)); Labels(runner).size() > 1 && !side.empty()) {
    summary += "\n### Side by side, per turn\n\n" + side;
  }
  for (const std::string& n : runner.notes()) summary += "\nNote: " + n + "\n";
  if (config.print_turns) std::printf("\n## Per turn\n\n%s", TurnTable(rows).c_str());
  std::printf("\n%s", summary.substr(summary.find("\n\n") + 2).c_str());
  Status s = WriteResults(config.out_dir, rows, BuildEnvironment(config, runner), summary + "\n## Per turn\n\n" + TurnTable(rows));
  if (!s.ok()) {
    std::fprintf(stderr, "hearth bench: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("\nResults: %s (rows.jsonl, turns.csv, env.json, summary.json, summary.md)\n", config.out_dir.c_str());
  if (config.plots) {
    PlotResult p = MakePlots(config.out_dir, rows, Labels(runner), pressure);
    for (const std::string& f : p.files) std::printf("Plot: %s\n", f.c_str());
    if (!p.message.empty()) std::printf("Plots: %s\n", p.message.c_str());
  }
  std::fflush(stdout);
  return 0;
}

int RunBench(const BenchConfig& config) {
  Runner runner(config.targets, config.render, config.run);
  if (Status s = runner.Start(); !s.ok()) {
    std::fprintf(stderr, "hearth bench: %s\n", s.message().c_str());
    return 1;
  }
  if (!config.replay_path.empty()) {
    auto lines = ReadReplayFile(config.replay_path, config.replay_flavor);
    if (!lines.ok()) {
      std::fprintf(stderr, "hearth bench: %s\n", lines.status().message().c_str());
      return 1;
    }
    for (int rep = 0; rep < config.reps; ++rep) runner.Replay(*lines, config.replay_max_tokens);
  }
  // Probed before the scenarios and again after them: the summary takes the faster.
  const bool probe = config.depth_probe_tokens > 0 && !config.scenarios.empty();
  const uint64_t probe_seed = MixSeed(config.spec.seed, std::hash<std::string>{}(config.spec.nonce));
  if (probe) runner.DepthProbe(config.depth_probe_tokens, probe_seed);
  for (Scenario sc : config.scenarios) {
    for (int rep = 0; rep < config.reps; ++rep) {
      WorkloadSpec spec = config.spec;
      spec.scenario = sc;
      spec.rep = rep;
      runner.Run(MakeWorkload(spec));
    }
  }
  if (probe) runner.DepthProbe(config.depth_probe_tokens, MixSeed(probe_seed, 1));
  if (!config.sweep_sizes.empty()) {
    for (int rep = 0; rep < config.reps; ++rep) {
      runner.Sweep(config.sweep_sizes, config.spec.seed, rep, /*warm=*/!config.sweep_cold_only);
    }
  }
  // Memory pressure, smallest working set first. The servers' caches keep what earlier
  // points left, as a server's would; the nonce and the seed keep points from sharing text.
  std::vector<PressureShape> shapes;
  for (int length : config.pressure_lengths) {
    for (int n : config.pressure_conversations) shapes.push_back({n, length, config.pressure_turns});
  }
  std::sort(shapes.begin(), shapes.end(), [](const PressureShape& a, const PressureShape& b) {
    return static_cast<long>(a.n_conversations) * a.conversation_tokens < static_cast<long>(b.n_conversations) * b.conversation_tokens;
  });
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (int rep = 0; rep < config.reps; ++rep) {
      WorkloadSpec spec = PressureSpec(config.spec, shapes[i]);
      spec.seed = MixSeed(config.spec.seed, 0x707073, i);
      spec.rep = rep;
      Workload w = MakeWorkload(spec);
      w.name = PressureName(shapes[i]);
      runner.Run(w);
    }
  }
  if (shapes.empty()) return FinishRun(config, runner, "", {});
  const std::optional<int> cells = DeviceCells(config, runner.Environment());
  if (!cells) {
    std::fprintf(stderr, "hearth bench: device cells unknown (pass --device-cells, the servers' -c): no pressure plot\n");
  }
  const std::vector<PressurePoint> points = SummarizePressure(runner.rows(), shapes, Labels(runner), cells);
  return FinishRun(config, runner, PressureMarkdown(points, runner.rows(), cells, shapes.size() == 1), points);
}

}  // namespace hearth::bench
