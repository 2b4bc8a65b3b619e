// Turning rows into a results folder and readable tables.
//
// A results folder holds:
//   rows.jsonl        one JSON object per request (results.h's RowToJson)
//   turns.csv         the same rows as CSV
//   env.json          CPU, threads, model file, servers (versions, props), options, notes
//   summary.md        the Markdown summary printed at the end of a run
//   summary.json      per server and scenario, the summary's figures (results.h's GroupToJson)
//   plots/            gnuplot data, the generated script plots.gp, and the PNGs
//
// Thread safety: pure functions, except that writing touches the filesystem and plotting
// runs gnuplot.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bench/pressure.h"
#include "bench/results.h"

namespace hearth::bench {

// Per-turn table, Markdown.
std::string TurnTable(const std::vector<TurnRow>& rows);
// Per scenario and server, sessions, server-to-server ratios and the sweep, Markdown.
// `servers` gives the order (the first is the baseline of the ratios).
std::string SummaryMarkdown(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers);

// The host as the results record it: CPU model, logical CPUs, memory.
Json HostInfo();

// Writes rows.jsonl, turns.csv, env.json, summary.json and summary.md. Errors: kUnavailable when the
// folder cannot be created or written (what was written stays).
Status WriteResults(const std::string& dir, const std::vector<TurnRow>& rows, const Json& env,
                    const std::string& summary_md);

// Writes plot data and plots.gp under dir/plots and runs gnuplot when it is installed.
// `pressure` points with a pressure figure add pressure.png (prefilled ÷ new against
// working set ÷ device cells, one line per server and conversation length).
// Returns the PNG paths, or a message saying why there are none.
struct PlotResult {
  std::vector<std::string> files;
  std::string message;
};
PlotResult MakePlots(const std::string& dir, const std::vector<TurnRow>& rows, const std::vector<std::string>& servers,
                     const std::vector<PressurePoint>& pressure);

}  // namespace hearth::bench
