// Side by side: the same sessions as each server ran them, turn by turn, as a Markdown
// table and as a log-log SVG plot of time to first token against prompt size. This is
// what `make demo` shows (scripts/demo.sh): a server that re-prefills the conversation
// draws a line that climbs with the session; one that prefills only what is new stays flat.
//
// Rows are matched across servers by (scenario, rep, session, turn); sweep rows are left
// out (they are not sessions). The SVG is written here, with no plotting tool, so a machine
// without gnuplot still gets the plot.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/results.h"

namespace hearth::bench {

// One Markdown table per (scenario, rep, session), one line per turn: kind, prompt tokens,
// new tokens, then prefilled tokens and TTFT ms for each of `servers` in order, and a last
// line with the sums. Prompt tokens differ between servers only when their replies did;
// then the cell lists each ("a / b"). Empty when no session rows are found.
std::string SideBySideTable(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers);

// A series of a log-log plot: its points are joined in increasing x.
struct PlotSeries {
  std::string title;
  std::vector<std::pair<double, double>> xy;
};

// An SVG document: both axes logarithmic, gridlines at 1, 2 and 5 times each power of ten
// (at every multiple on an axis shorter than a decade, at the powers only on a long one),
// one coloured line with markers per series and a legend. Points with x or y <= 0 are left
// out (they have no place on a log scale). Returns an empty string when no series has a
// point left.
std::string LogLogSvg(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      std::vector<PlotSeries> series);

// The series of `scenario`'s TTFT plot: per server, (prompt tokens, TTFT ms) of each
// successful turn that was not cut by the client.
std::vector<PlotSeries> TtftSeries(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers,
                                   const std::string& scenario);

}  // namespace hearth::bench
