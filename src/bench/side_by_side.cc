#include "bench/side_by_side.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

namespace hearth::bench {
namespace {

using TurnKey = std::tuple<std::string, int, int, int>;  // scenario, rep, session, turn

std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// [lo, hi] in log10 units, padded so that no point sits on the frame.
std::pair<double, double> LogRange(double min, double max) {
  double lo = std::log10(min), hi = std::log10(max);
  if (hi - lo < 0.3) {
    const double mid = (lo + hi) / 2;
    lo = mid - 0.15;
    hi = mid + 0.15;
  }
  const double pad = (hi - lo) * 0.05;
  return {lo - pad, hi + pad};
}

// Tick values inside [lo, hi] (log10 units): 1, 2 and 5 times each power of ten; every
// multiple when the axis spans less than a decade, only the powers when it spans many.
std::vector<double> Ticks(double lo, double hi) {
  std::vector<double> out;
  std::vector<double> steps = {1, 2, 5};
  if (hi - lo > 2.5) steps = {1};
  if (hi - lo < 1) steps = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int k = static_cast<int>(std::floor(lo)); k <= static_cast<int>(std::ceil(hi)); ++k) {
    for (double m : steps) {
      const double v = m * std::pow(10.0, k);
      if (std::log10(v) >= lo && std::log10(v) <= hi) out.push_back(v);
    }
  }
  return out;
}

// Per turn, each server's row (in `servers` order, null where it has none); sessions in
// the order they first appear.
struct TurnIndex {
  std::map<TurnKey, std::vector<const TurnRow*>> turns;
  std::vector<std::tuple<std::string, int, int>> sessions;  // scenario, rep, session
};

TurnIndex IndexTurns(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers) {
  TurnIndex index;
  for (const TurnRow& r : rows) {
    if (r.scenario == "sweep" || r.scenario == kDepthProbeScenario) continue;
    const auto it = std::find(servers.begin(), servers.end(), r.server);
    if (it == servers.end()) continue;
    auto& slot = index.turns[{r.scenario, r.rep, r.session, r.turn}];
    if (slot.empty()) slot.resize(servers.size(), nullptr);
    slot[it - servers.begin()] = &r;
    const std::tuple<std::string, int, int> session{r.scenario, r.rep, r.session};
    if (std::find(index.sessions.begin(), index.sessions.end(), session) == index.sessions.end()) {
      index.sessions.push_back(session);
    }
  }
  return index;
}

// A session's totals, per server in `servers` order.
struct SessionSums {
  std::vector<long> prefilled;
  std::vector<double> ttft;
  long n_new = 0;
};

// One turn's line: kind, prompt tokens (each server's count where they differ), new
// tokens, then each server's prefilled tokens and TTFT; adds them to `sums`.
std::string TurnLine(int turn, const std::vector<const TurnRow*>& by_server, SessionSums& sums) {
  const TurnRow* first = nullptr;
  std::vector<std::string> prompts;
  for (const TurnRow* r : by_server) {
    if (!r) continue;
    if (!first) first = r;
    const std::string p = FormatCell(r->prompt_tokens);
    if (std::find(prompts.begin(), prompts.end(), p) == prompts.end()) prompts.push_back(p);
  }
  std::string prompt;
  for (const std::string& p : prompts) prompt += (prompt.empty() ? "" : " / ") + p;
  std::string s = "| " + std::to_string(turn + 1) + " | " + first->kind + " | " + prompt + " | " +
                  FormatCell(first->new_tokens) + " |";
  if (first->new_tokens) sums.n_new += *first->new_tokens;
  for (size_t i = 0; i < by_server.size(); ++i) {
    const TurnRow* r = by_server[i];
    if (!r) {
      s += " - | - |";
      continue;
    }
    std::string ttft = r->ok ? FormatCell(r->ttft_ms) : "error";
    if (r->interrupted) ttft += " (cut)";
    s += " " + FormatCell(r->prefilled_tokens()) + " | " + ttft + " |";
    if (auto p = r->prefilled_tokens()) sums.prefilled[i] += *p;
    if (r->ok && r->ttft_ms) sums.ttft[i] += *r->ttft_ms;
  }
  return s + "\n";
}

std::string SessionTable(const TurnIndex& index, const std::tuple<std::string, int, int>& which,
                         const std::vector<std::string>& servers) {
  const auto& [scenario, rep, session] = which;
  std::string s = "**" + scenario + "**, session " + std::to_string(session) +
                  (rep > 0 ? ", rep " + std::to_string(rep) : "") +
                  ": prefilled = prompt tokens the server computed for the request; new = tokens new in it.\n\n"
                  "| turn | kind | prompt | new |";
  std::string rule = "|---|---|---|---|";
  for (const std::string& sv : servers) {
    s += " " + sv + " prefilled | " + sv + " TTFT ms |";
    rule += "---|---|";
  }
  s += "\n" + rule + "\n";
  SessionSums sums{std::vector<long>(servers.size(), 0), std::vector<double>(servers.size(), 0)};
  for (auto it = index.turns.lower_bound({scenario, rep, session, 0});
       it != index.turns.end() && std::get<0>(it->first) == scenario && std::get<1>(it->first) == rep &&
       std::get<2>(it->first) == session;
       ++it) {
    s += TurnLine(std::get<3>(it->first), it->second, sums);
  }
  s += "| all | | | " + std::to_string(sums.n_new) + " |";
  for (size_t i = 0; i < servers.size(); ++i) {
    s += " " + std::to_string(sums.prefilled[i]) + " | " + FormatNumber(sums.ttft[i]) + " |";
  }
  return s + "\n\n";
}

// The points' extent, after dropping those a log scale cannot place and sorting each
// series by x; nullopt when no point is left.
struct Extent {
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
};

std::optional<Extent> PrepareSeries(std::vector<PlotSeries>& series) {
  Extent e;
  bool any = false;
  for (PlotSeries& s : series) {
    std::erase_if(s.xy, [](const std::pair<double, double>& p) { return !(p.first > 0 && p.second > 0); });
    std::sort(s.xy.begin(), s.xy.end());
    for (auto [x, y] : s.xy) {
      e.x_min = any ? std::min(e.x_min, x) : x;
      e.x_max = any ? std::max(e.x_max, x) : x;
      e.y_min = any ? std::min(e.y_min, y) : y;
      e.y_max = any ? std::max(e.y_max, y) : y;
      any = true;
    }
  }
  if (!any) return std::nullopt;
  return e;
}

// The plot's layout in pixels, and where a point goes on it.
struct LogFrame {
  static constexpr double kWidth = 840, kHeight = 480, kLeft = 100, kTop = 50, kRight = 620, kBottom = 410;
  double x_lo, x_hi, y_lo, y_hi;  // the axes' ranges, log10 units

  double px(double x) const { return kLeft + (std::log10(x) - x_lo) / (x_hi - x_lo) * (kRight - kLeft); }
  double py(double y) const { return kBottom - (std::log10(y) - y_lo) / (y_hi - y_lo) * (kBottom - kTop); }
};

// The document's head: title, gridlines with their values, the frame, the axis labels.
std::string SvgAxes(const LogFrame& f, const std::string& title, const std::string& xlabel,
                    const std::string& ylabel) {
  using F = LogFrame;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fixed(F::kWidth) + "\" height=\"" +
                    Fixed(F::kHeight) + "\" viewBox=\"0 0 " + Fixed(F::kWidth) + " " + Fixed(F::kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"13\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
                    "<text x=\"" + Fixed(F::kWidth / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" +
                    Xml(title) + "</text>\n";
  for (double v : Ticks(f.x_lo, f.x_hi)) {
    const std::string x = Fixed(f.px(v));
    svg += "<line x1=\"" + x + "\" y1=\"" + Fixed(F::kTop) + "\" x2=\"" + x + "\" y2=\"" + Fixed(F::kBottom) +
           "\" stroke=\"#ddd\"/>\n<text x=\"" + x + "\" y=\"" + Fixed(F::kBottom + 18) + "\" text-anchor=\"middle\">" +
           FormatNumber(v) + "</text>\n";
  }
  for (double v : Ticks(f.y_lo, f.y_hi)) {
    const std::string y = Fixed(f.py(v));
    svg += "<line x1=\"" + Fixed(F::kLeft) + "\" y1=\"" + y + "\" x2=\"" + Fixed(F::kRight) + "\" y2=\"" + y +
           "\" stroke=\"#ddd\"/>\n<text x=\"" + Fixed(F::kLeft - 6) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + FormatNumber(v) + "</text>\n";
  }
  svg += "<rect x=\"" + Fixed(F::kLeft) + "\" y=\"" + Fixed(F::kTop) + "\" width=\"" + Fixed(F::kRight - F::kLeft) +
         "\" height=\"" + Fixed(F::kBottom - F::kTop) + "\" fill=\"none\" stroke=\"#333\"/>\n"
         "<text x=\"" + Fixed((F::kLeft + F::kRight) / 2) + "\" y=\"" + Fixed(F::kBottom + 45) +
         "\" text-anchor=\"middle\">" + Xml(xlabel) + " (log scale)</text>\n"
         "<text transform=\"translate(20 " + Fixed((F::kTop + F::kBottom) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         Xml(ylabel) + " (log scale)</text>\n";
  return svg;
}

// Each series with points: a coloured line, a marker per point, an entry in the legend.
std::string SvgLines(const LogFrame& f, const std::vector<PlotSeries>& series) {
  using F = LogFrame;
  static const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::string svg;
  int n_drawn = 0;
  for (const PlotSeries& s : series) {
    if (s.xy.empty()) continue;
    const std::string color = kColors[n_drawn % (sizeof kColors / sizeof kColors[0])];
    std::string points;
    for (auto [x, y] : s.xy) points += (points.empty() ? "" : " ") + Fixed(f.px(x)) + "," + Fixed(f.py(y));
    svg += "<g><title>" + Xml(s.title) + "</title>\n<polyline fill=\"none\" stroke=\"" + color +
           "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    for (auto [x, y] : s.xy) {
      svg += "<circle cx=\"" + Fixed(f.px(x)) + "\" cy=\"" + Fixed(f.py(y)) + "\" r=\"4\" fill=\"" + color +
             "\"><title>" + FormatNumber(x) + ", " + FormatNumber(y) + "</title></circle>\n";
    }
    const std::string ly = Fixed(F::kTop + 10 + 22 * n_drawn);
    svg += "<line x1=\"" + Fixed(F::kRight + 15) + "\" y1=\"" + ly + "\" x2=\"" + Fixed(F::kRight + 45) + "\" y2=\"" +
           ly + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n<text x=\"" + Fixed(F::kRight + 52) + "\" y=\"" + ly +
           "\" dominant-baseline=\"middle\">" + Xml(s.title) + "</text>\n</g>\n";
    ++n_drawn;
  }
  return svg;
}

}  // namespace

std::string SideBySideTable(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers) {
  const TurnIndex index = IndexTurns(rows, servers);
  std::string s;
  for (const auto& session : index.sessions) s += SessionTable(index, session, servers);
  return s;
}

std::vector<PlotSeries> TtftSeries(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers,
                                   const std::string& scenario) {
  std::vector<PlotSeries> out;
  for (const std::string& sv : servers) {
    PlotSeries s{sv, {}};
    for (const TurnRow& r : rows) {
      if (r.server != sv || r.scenario != scenario || !r.ok || r.interrupted || !r.ttft_ms || !r.prompt_tokens) continue;
      s.xy.emplace_back(*r.prompt_tokens, *r.ttft_ms);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string LogLogSvg(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      std::vector<PlotSeries> series) {
  const std::optional<Extent> e = PrepareSeries(series);
  if (!e) return "";
  const auto [x_lo, x_hi] = LogRange(e->x_min, e->x_max);
  const auto [y_lo, y_hi] = LogRange(e->y_min, e->y_max);
  const LogFrame frame{x_lo, x_hi, y_lo, y_hi};
  return SvgAxes(frame, title, xlabel, ylabel) + SvgLines(frame, series) + "</svg>\n";
}

}  // namespace hearth::bench
