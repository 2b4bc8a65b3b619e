#include "bench/report.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace hearth::bench {
namespace {

std::string SpreadCell(const std::optional<Spread>& s) {
  if (!s) return "-";
  return FormatNumber(s->p50) + " / " + FormatNumber(s->p90) + " / " + FormatNumber(s->min) + " / " +
         FormatNumber(s->max);
}

Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return Unavailable("cannot write " + path.string());
  return Status::Ok();
}

std::string TargetCell(const GroupSummary& g) {
  if (g.n_target_checked == 0) return g.n_reuse_unknown > 0 ? "unknown (no cached-token count)" : "-";
  return std::to_string(g.n_target_met) + "/" + std::to_string(g.n_target_checked);
}

}  // namespace

std::string TurnTable(const std::vector<TurnRow>& rows) {
  std::string s =
      "| server | scenario | rep | session | turn | kind | prompt | reused | prefilled | new | prefilled÷new | target | "
      "TTFT ms | e2e ms | tok/s | note |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const TurnRow& r : rows) {
    auto met = r.target_met();
    std::string note = r.interrupted ? "cut by client" : "";
    if (!r.ok) note = "error: " + r.error.substr(0, 80);
    for (char& c : note) {
      if (c == '|' || c == '\n') c = ' ';
    }
    s += "| " + r.server + " | " + r.scenario + " | " + std::to_string(r.rep) + " | " + std::to_string(r.session) + " | " +
         std::to_string(r.turn + 1) + " | " + r.kind + " | " + FormatCell(r.prompt_tokens) + " | " +
         (r.reused_tokens ? std::to_string(*r.reused_tokens) : std::string(r.interrupted ? "-" : "unknown")) + " | " +
         FormatCell(r.prefilled_tokens()) + " | " + FormatCell(r.new_tokens) + " | " + FormatCell(r.prefill_ratio()) + " | " +
         (met ? (*met ? "ok" : "MISS") : "-") + " | " + FormatCell(r.ttft_ms) + " | " + FormatNumber(r.e2e_ms) + " | " +
         FormatCell(r.decode_tps) + " | " + note + " |\n";
  }
  return s;
}

namespace {

std::string ScenarioTable(const std::vector<GroupSummary>& groups) {
  std::string s =
      "### Sessions by scenario\n\n"
      "Times in ms as p50 / p90 / min / max. prefilled÷new: all follow-up turns together (sum over sum), then per "
      "turn p50 / p90 / min / max. Target: follow-up turns with prefilled ≤ 1.02 × new + 8. TTFT÷ideal: follow-up "
      "TTFT over (new tokens × the session's cold prefill ms per token + one decode step), p50 / p90 / min / max; "
      "target ≤ 1.2. at depth: the same with those tokens' cost where they sit, attention over the tokens before "
      "them included (from the depth probe and the first turn).\n\n"
      "| scenario | server | turns | errors | first-turn TTFT | follow-up TTFT | TTFT÷ideal | at depth | e2e | "
      "decode tok/s | prefilled÷new | per turn | target met |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const GroupSummary& g : groups) {
    s += "| " + g.scenario + " | " + g.server + " | " + std::to_string(g.n_turns) + " | " + std::to_string(g.n_errors) +
         " | " + SpreadCell(g.ttft_first) + " | " + SpreadCell(g.ttft_follow_up) + " | " + SpreadCell(g.ttft_vs_ideal) +
         " | " + SpreadCell(g.ttft_vs_ideal_at_depth) + " | " + SpreadCell(g.e2e) + " | " +
         (g.decode_tps ? FormatNumber(g.decode_tps->p50) : "-") + " | " +
         (g.session_ratio ? FormatNumber(*g.session_ratio) : (g.n_reuse_unknown ? "unknown" : "-")) + " | " +
         SpreadCell(g.ratio) + " | " + TargetCell(g) + " |\n";
  }
  return s;
}

// Each other server's medians over `base`'s, scenario by scenario.
std::string RatiosTable(const std::vector<GroupSummary>& groups, const std::string& base_server) {
  std::string s = "\n### Ratios against " + base_server + "\n\n"
                  "| scenario | server | follow-up TTFT p50 | e2e p50 | decode tok/s p50 | prefilled÷new |\n"
                  "|---|---|---|---|---|---|\n";
  std::map<std::string, const GroupSummary*> base;
  for (const GroupSummary& g : groups) {
    if (g.server == base_server) base[g.scenario] = &g;
  }
  auto ratio = [](const std::optional<double>& x, const std::optional<double>& y) {
    return (x && y && *y > 0) ? FormatNumber(*x / *y) + "×" : std::string("-");
  };
  auto p50 = [](const std::optional<Spread>& sp) { return sp ? std::optional<double>(sp->p50) : std::nullopt; };
  for (const GroupSummary& g : groups) {
    auto it = base.find(g.scenario);
    if (g.server == base_server || it == base.end()) continue;
    const GroupSummary& b = *it->second;
    s += "| " + g.scenario + " | " + g.server + " | " + ratio(p50(g.ttft_follow_up), p50(b.ttft_follow_up)) + " | " +
         ratio(p50(g.e2e), p50(b.e2e)) + " | " + ratio(p50(g.decode_tps), p50(b.decode_tps)) + " | " +
         ratio(g.session_ratio, b.session_ratio) + " |\n";
  }
  return s;
}

std::string SessionsTable(const std::vector<TurnRow>& session_rows) {
  std::string s = "\n### Per session\n\n| scenario | server | rep | session | prefilled | new | prefilled÷new | "
                  "first missed turn |\n|---|---|---|---|---|---|---|---|\n";
  for (const SessionSummary& ss : SummarizeSessions(session_rows)) {
    s += "| " + ss.scenario + " | " + ss.server + " | " + std::to_string(ss.rep) + " | " + std::to_string(ss.session) +
         " | " + std::to_string(ss.n_prefilled) + " | " + std::to_string(ss.n_new) + " | " + FormatCell(ss.ratio) + " | " +
         (ss.first_missed_turn ? std::to_string(*ss.first_missed_turn + 1) : std::string("-")) + " |\n";
  }
  return s;
}

// The sweep's rows come in pairs: cold, then warm.
std::string SweepTable(const std::vector<TurnRow>& sweep_rows) {
  std::string s = "\n### Cold / warm sweep\n\nThe same prompt twice: first unseen (a nonce at the very start), then "
                  "repeated.\n\n| prompt tokens | server | rep | cold TTFT ms | warm TTFT ms | warm ÷ cold | warm reused "
                  "|\n|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i + 1 < sweep_rows.size(); i += 2) {
    const TurnRow& c = sweep_rows[i];
    const TurnRow& w = sweep_rows[i + 1];
    std::string ratio = (c.ttft_ms && w.ttft_ms && *c.ttft_ms > 0) ? FormatNumber(*w.ttft_ms / *c.ttft_ms) : "-";
    s += "| " + FormatCell(c.prompt_tokens) + " | " + c.server + " | " + std::to_string(c.rep) + " | " +
         FormatCell(c.ttft_ms) + " | " + FormatCell(w.ttft_ms) + " | " + ratio + " | " +
         (w.reused_tokens ? std::to_string(*w.reused_tokens) : std::string("unknown")) + " |\n";
  }
  return s;
}

}  // namespace

std::string SummaryMarkdown(const std::vector<TurnRow>& rows, const std::vector<std::string>& servers) {
  std::vector<TurnRow> session_rows, sweep_rows;
  // The depth probe's rows go with the sessions, whose ideal at depth they calibrate.
  for (const TurnRow& r : rows) (r.scenario == "sweep" ? sweep_rows : session_rows).push_back(r);
  std::string s;
  const std::vector<GroupSummary> groups = SummarizeGroups(session_rows);
  if (!groups.empty()) {
    s += ScenarioTable(groups);
    if (servers.size() > 1) s += RatiosTable(groups, servers[0]);
    s += SessionsTable(session_rows);
  }
  if (!sweep_rows.empty()) s += SweepTable(sweep_rows);
  return s;
}

Json HostInfo() {
  Json h;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, model = "unknown";
  while (std::getline(cpu, line)) {
    if (line.starts_with("model name")) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  h["cpu"] = model;
  h["logical_cpus"] = std::thread::hardware_concurrency();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) h["memory_gib"] = static_cast<double>(pages) * static_cast<double>(page) / (1u << 30);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) h["hostname"] = host;
  return h;
}

Status WriteResults(const std::string& dir, const std::vector<TurnRow>& rows, const Json& env,
                    const std::string& summary_md) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create " + dir + ": " + ec.message());
  const std::filesystem::path d(dir);
  std::string jsonl, csv = CsvHeader();
  for (const TurnRow& r : rows) {
    jsonl += DumpJson(RowToJson(r)) + "\n";
    csv += CsvLine(r);
  }
  HEARTH_RETURN_IF_ERROR(WriteFile(d / "rows.jsonl", jsonl));
  HEARTH_RETURN_IF_ERROR(WriteFile(d / "turns.csv", csv));
  HEARTH_RETURN_IF_ERROR(WriteFile(d / "env.json", env.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"));
  Json groups = Json::array();
  for (const GroupSummary& g : SummarizeGroups(rows)) groups.push_back(GroupToJson(g));
  HEARTH_RETURN_IF_ERROR(WriteFile(d / "summary.json", groups.dump(2) + "\n"));
  return WriteFile(d / "summary.md", summary_md);
}

}  // namespace hearth::bench
