// PNG plots through gnuplot: the bench writes data files and a script, then runs it. The
// per-scenario TTFT plot is also written as SVG directly (side_by_side.h), gnuplot or not.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "bench/report.h"
#include "bench/side_by_side.h"

namespace hearth::bench {
namespace {

struct Series {
  std::string title;
  std::string file;
  std::string style;  // "points", "linespoints", "lines"
  std::vector<std::pair<double, double>> xy;
  double min_y = 1.0;  // token counts: 0 is drawn as 1 on the log scale
};

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  return out;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

// Writes the series' data and appends one plot command to `script`.
bool AddPlot(const std::filesystem::path& dir, const std::string& png, const std::string& title,
             const std::string& xlabel, const std::string& ylabel, std::vector<Series> series, std::string* script) {
  std::string plot;
  for (Series& s : series) {
    if (s.xy.empty()) continue;
    std::sort(s.xy.begin(), s.xy.end());
    std::ofstream out(dir / s.file);
    for (auto [x, y] : s.xy) out << x << ' ' << std::max(y, s.min_y) << '\n';
    plot += std::string(plot.empty() ? "plot " : ", \\\n     ") + Quote(s.file) + " using 1:2 with " + s.style +
            " title " + Quote(s.title);
  }
  if (plot.empty()) return false;
  *script += "set output " + Quote(png) + "\nset title " + Quote(title) + "\nset xlabel " + Quote(xlabel) +
             "\nset ylabel " + Quote(ylabel) + "\n" + plot + "\n\n";
  return true;
}

// The gnuplot script being written, and the PNGs it will draw.
struct PlotScript {
  std::filesystem::path dir;
  std::string text;
  std::vector<std::string> pngs;

  void Add(const std::string& png, const std::string& title, const std::string& xlabel, const std::string& ylabel,
           std::vector<Series> series) {
    if (AddPlot(dir, png, title, xlabel, ylabel, std::move(series), &text)) pngs.push_back(png);
  }
};

// Time to first token against context size: first turns and sweep-cold are cold,
// follow-up turns and sweep-warm are warm; one pair of series per server.
void AddTtftVsContext(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers, PlotScript& script) {
  std::vector<Series> ttft;
  for (const std::string& sv : servers) {
    Series first{sv + " first turns (cold)", "ttft_" + Sanitize(sv) + "_first.dat", "points pt 6"};
    Series follow{sv + " follow-up turns (warm)", "ttft_" + Sanitize(sv) + "_follow.dat", "points pt 7"};
    Series cold{sv + " sweep cold", "ttft_" + Sanitize(sv) + "_cold.dat", "linespoints pt 4"};
    Series warm{sv + " sweep warm", "ttft_" + Sanitize(sv) + "_warm.dat", "linespoints pt 5"};
    for (const TurnRow& r : rows) {
      if (r.server != sv || !r.ok || r.interrupted || !r.ttft_ms || !r.prompt_tokens) continue;
      const std::pair<double, double> p(*r.prompt_tokens, *r.ttft_ms);
      if (r.kind == "cold") cold.xy.push_back(p);
      else if (r.kind == "warm") warm.xy.push_back(p);
      else (r.follow_up() ? follow : first).xy.push_back(p);
    }
    for (Series* s : {&first, &follow, &cold, &warm}) ttft.push_back(std::move(*s));
  }
  script.Add("ttft_vs_context.png", "Time to first token against context size", "prompt tokens",
             "time to first token (ms)", std::move(ttft));
}

// Prefilled tokens per turn of scenario `sc`: the median over sessions and repetitions of
// each turn, per server, with the new tokens as the ideal.
std::vector<Series> PrefilledSeries(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers,
                                    const std::string& sc) {
  std::vector<Series> series;
  std::map<int, std::vector<double>> fresh;
  for (const std::string& sv : servers) {
    std::map<int, std::vector<double>> by_turn;
    for (const TurnRow& r : rows) {
      if (r.scenario != sc || r.server != sv || !r.ok) continue;
      if (auto p = r.prefilled_tokens()) by_turn[r.turn + 1].push_back(*p);
      if (r.new_tokens) fresh[r.turn + 1].push_back(*r.new_tokens);
    }
    Series s{sv + " prefilled", "prefilled_" + Sanitize(sc) + "_" + Sanitize(sv) + ".dat", "linespoints"};
    for (auto& [turn, v] : by_turn) s.xy.emplace_back(turn, *Percentile(v, 50));
    series.push_back(std::move(s));
  }
  Series ideal{"new tokens (ideal)", "prefilled_" + Sanitize(sc) + "_new.dat", "lines dt 2 lw 2"};
  for (auto& [turn, v] : fresh) ideal.xy.emplace_back(turn, *Percentile(v, 50));
  series.push_back(std::move(ideal));
  return series;
}

// Scenario `sc`'s plots: time to first token per turn (SVG, written here, and PNG), one
// line per server, flat where a server prefills only what is new, climbing with the
// session where it prefills the conversation; then prefilled tokens per turn.
void AddScenarioPlots(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers, const std::string& sc,
                      PlotScript& script, std::vector<std::string>* files) {
  std::vector<Series> prefilled = PrefilledSeries(rows, servers, sc);
  const std::string ttft_title = "Time to first token per turn: " + sc;
  std::vector<PlotSeries> ttft = TtftSeries(rows, servers, sc);
  const std::string svg = LogLogSvg(ttft_title, "prompt tokens", "time to first token (ms)", ttft);
  if (!svg.empty()) {
    const std::filesystem::path path = script.dir / ("ttft_" + Sanitize(sc) + ".svg");
    std::ofstream(path) << svg;
    files->push_back(path.string());
  }
  std::vector<Series> per_turn;
  for (PlotSeries& p : ttft) {
    per_turn.push_back(Series{p.title, "ttft_" + Sanitize(sc) + "_" + Sanitize(p.title) + ".dat", "linespoints pt 7",
                              std::move(p.xy)});
  }
  script.Add("ttft_" + Sanitize(sc) + ".png", ttft_title, "prompt tokens", "time to first token (ms)",
             std::move(per_turn));
  script.Add("prefilled_" + Sanitize(sc) + ".png", "Prefilled tokens per turn: " + sc + " (median over sessions; 0 drawn as 1)",
             "turn", "tokens prefilled at request time", std::move(prefilled));
}

// Memory pressure: one line per server and conversation length, over the number of
// conversations (which moves the working set), with the flagging limit drawn across.
void AddPressurePlot(const std::vector<PressurePoint>& pressure, const std::vector<std::string>& servers,
                     PlotScript& script) {
  std::vector<Series> series;
  double x_min = 0, x_max = 0;
  for (const std::string& sv : servers) {
    std::map<int, Series> by_length;
    for (const PressurePoint& p : pressure) {
      if (p.server != sv || !p.pressure || !p.ratio) continue;
      const int len = p.shape.conversation_tokens;
      auto [it, fresh] = by_length.try_emplace(len);
      if (fresh) {
        it->second = Series{sv + ", " + std::to_string(len) + "-token conversations",
                            "pressure_" + Sanitize(sv) + "_" + std::to_string(len) + ".dat", "linespoints"};
        it->second.min_y = 0.01;
      }
      it->second.xy.emplace_back(*p.pressure, *p.ratio);
      x_min = x_min == 0 ? *p.pressure : std::min(x_min, *p.pressure);
      x_max = std::max(x_max, *p.pressure);
    }
    for (auto& [len, s] : by_length) series.push_back(std::move(s));
  }
  if (series.empty()) return;
  Series limit{"limit (" + FormatNumber(kPressureLimit) + ")", "pressure_limit.dat", "lines dt 2 lw 2"};
  limit.xy = {{x_min, kPressureLimit}, {x_max, kPressureLimit}};
  series.push_back(std::move(limit));
  script.Add("pressure.png", "Memory pressure: prefilled / new on follow-ups (sum over a point)",
             "working set / device cells", "prefilled / new", std::move(series));
}

// Writes plots.gp and runs gnuplot over it, adding the PNGs drawn to `result`.
void DrawPngs(const PlotScript& script, PlotResult& result) {
  std::ofstream(script.dir / "plots.gp") << script.text;
  if (script.pngs.empty()) {
    result.message = "nothing to plot";
    return;
  }
  if (!HaveGnuplot()) {
    result.message = "gnuplot is not installed, so no PNGs (Debian: apt-get install gnuplot-nox, or "
                     "scripts/install-deps.sh); data and plots.gp are in " + script.dir.string();
    return;
  }
  const std::string cmd = "cd " + Quote(script.dir.string()) + " && gnuplot plots.gp 2>gnuplot.log";
  if (std::system(cmd.c_str()) != 0) {
    result.message = "gnuplot failed; see " + (script.dir / "gnuplot.log").string();
    return;
  }
  for (const std::string& p : script.pngs) result.files.push_back((script.dir / p).string());
}

}  // namespace

PlotResult MakePlots(const std::string& dir_in, const std::vector<TurnRow>& rows, const std::vector<std::string>& servers,
                     const std::vector<PressurePoint>& pressure) {
  PlotResult result;
  PlotScript script;
  script.dir = std::filesystem::path(dir_in) / "plots";
  std::error_code ec;
  std::filesystem::create_directories(script.dir, ec);
  if (ec) {
    result.message = "cannot create " + script.dir.string() + ": " + ec.message();
    return result;
  }
  script.text =
      "# Generated by hearth bench; run `gnuplot plots.gp` in this folder.\n"
      "set terminal pngcairo size 1000,650 noenhanced\nset logscale xy\nset grid\nset key outside right top\n\n";
  AddTtftVsContext(rows, servers, script);
  std::set<std::string> scenarios;
  for (const TurnRow& r : rows) {
    if (r.kind != "cold" && r.kind != "warm") scenarios.insert(r.scenario);
  }
  for (const std::string& sc : scenarios) AddScenarioPlots(rows, servers, sc, script, &result.files);
  AddPressurePlot(pressure, servers, script);
  DrawPngs(script, result);
  return result;
}

}  // namespace hearth::bench
