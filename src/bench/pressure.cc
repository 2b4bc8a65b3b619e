#include "bench/pressure.h"

#include <algorithm>

namespace hearth::bench {
namespace {

std::string Cell(const std::optional<double>& v) { return v ? FormatNumber(*v) : "-"; }
std::string Cell(const std::optional<int>& v) { return v ? std::to_string(*v) : "?"; }

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '|' || c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

std::string SourcesText(const std::map<std::string, int>& sources) {
  std::string out;
  for (const char* k : {"device", "ram", "disk", "none", "unreported", "unknown"}) {
    auto it = sources.find(k);
    if (it == sources.end()) continue;
    out += (out.empty() ? "" : ", ") + std::string(k) + " " + std::to_string(it->second);
  }
  return out.empty() ? "-" : out;
}

WorkloadSpec PressureSpec(const WorkloadSpec& base, const PressureShape& shape) {
  WorkloadSpec spec = base;
  spec.scenario = Scenario::kPressure;
  spec.n_sessions = shape.n_conversations;
  spec.n_turns = shape.n_turns;
  spec.context_tokens = shape.conversation_tokens;
  return spec;
}

std::string PressureName(const PressureShape& shape) {
  return "pressure-" + std::to_string(shape.n_conversations) + "x" + std::to_string(shape.conversation_tokens);
}

std::string ReuseSource(const TurnRow& row) {
  if (!row.reused_tokens) return "unknown";
  if (*row.reused_tokens == 0) return "none";
  return row.reuse_tier.empty() ? "unreported" : row.reuse_tier;
}

std::optional<bool> OverPressureLimit(const TurnRow& row) {
  if (!row.follow_up() || !row.ok || row.interrupted) return std::nullopt;
  const auto prefilled = row.prefilled_tokens();
  if (!prefilled || !row.new_tokens || *row.new_tokens <= 0) return std::nullopt;
  return *prefilled > kPressureLimit * *row.new_tokens;
}

std::vector<PressurePoint> SummarizePressure(const std::vector<TurnRow>& rows, const std::vector<PressureShape>& shapes,
                                             const std::vector<std::string>& servers, std::optional<int> device_cells) {
  std::vector<PressurePoint> out;
  for (const PressureShape& shape : shapes) {
    const std::string name = PressureName(shape);
    for (const std::string& server : servers) {
      PressurePoint p{server, shape};
      std::map<std::pair<int, int>, long> longest;  // (rep, session) -> prompt + reply
      bool any = false;
      for (const TurnRow& r : rows) {
        if (r.scenario != name || r.server != server) continue;
        any = true;
        if (!r.ok) ++p.n_failed;
        if (r.ok && r.prompt_tokens) {
          long& l = longest[{r.rep, r.session}];
          l = std::max(l, static_cast<long>(*r.prompt_tokens + r.completion_tokens.value_or(0)));
        }
        const auto over = OverPressureLimit(r);
        if (!over) continue;
        ++p.n_follow_ups;
        if (*over) ++p.n_over;
        p.n_prefilled += *r.prefilled_tokens();
        p.n_new += *r.new_tokens;
        ++p.sources[ReuseSource(r)];
      }
      if (!any) continue;
      // Repetitions run one after another, so the set held at once is one repetition's.
      std::map<int, long> per_rep;
      for (const auto& [key, n] : longest) per_rep[key.first] += n;
      for (const auto& [rep, n] : per_rep) p.working_set_tokens = std::max(p.working_set_tokens, n);
      if (p.n_new > 0) p.ratio = static_cast<double>(p.n_prefilled) / static_cast<double>(p.n_new);
      if (device_cells && *device_cells > 0) {
        p.pressure = static_cast<double>(p.working_set_tokens) / static_cast<double>(*device_cells);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::string PressureMarkdown(const std::vector<PressurePoint>& points, const std::vector<TurnRow>& rows,
                             std::optional<int> device_cells, bool follow_ups) {
  std::string md = "## Memory pressure\n\nDevice cells: " + (device_cells ? std::to_string(*device_cells) : std::string("unknown")) +
                   ". A follow-up is flagged when prefilled ÷ new > " + FormatNumber(kPressureLimit) +
                   "; reuse sources are hearth's `usage.hearth_cache.tier` (others: unreported).\n\n"
                   "| server | conversations | tokens each | turns | working set | ÷ device cells | prefilled ÷ new | "
                   "flagged | reuse from | failed |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const PressurePoint& p : points) {
    md += "| " + p.server + " | " + std::to_string(p.shape.n_conversations) + " | " + std::to_string(p.shape.conversation_tokens) +
          " | " + std::to_string(p.shape.n_turns) + " | " + std::to_string(p.working_set_tokens) + " | " + Cell(p.pressure) +
          " | " + Cell(p.ratio) + " | " + std::to_string(p.n_over) + "/" + std::to_string(p.n_follow_ups) + " | " +
          SourcesText(p.sources) + " | " + std::to_string(p.n_failed) + " |\n";
  }
  if (!follow_ups) return md;
  std::string flagged;
  for (const PressurePoint& p : points) {
    const std::string name = PressureName(p.shape);
    for (const TurnRow& r : rows) {
      if (r.scenario != name || r.server != p.server || OverPressureLimit(r) != std::optional<bool>(true)) continue;
      flagged += "| " + r.server + " | " + name + " | " + std::to_string(r.session) + " | " + std::to_string(r.turn + 1) +
                 " | " + Cell(r.prompt_tokens) + " | " + Cell(r.reused_tokens) + " | " + Cell(r.prefilled_tokens()) + " | " +
                 Cell(r.new_tokens) + " | " + Cell(r.prefill_ratio()) + " | " + ReuseSource(r) + " | " +
                 (r.reuse_stopped.empty() ? "-" : OneLine(r.reuse_stopped)) + " |\n";
    }
  }
  if (flagged.empty()) return md + "\nNo follow-up was flagged.\n";
  return md + "\nFlagged follow-ups:\n\n| server | point | conversation | turn | prompt | reused | prefilled | new | "
              "prefilled÷new | reuse from | reuse stopped |\n|---|---|---|---|---|---|---|---|---|---|---|\n" + flagged;
}

}  // namespace hearth::bench
