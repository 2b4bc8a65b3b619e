#include "bench/results.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

namespace hearth::bench {
namespace {

template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

template <typename T>
std::string Cell(const std::optional<T>& v) {
  if (!v) return "";
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", *v);
    return buf;
  } else {
    return std::to_string(*v);
  }
}

std::string CsvQuote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

std::optional<int> TurnRow::prefilled_tokens() const {
  if (!prompt_tokens || !reused_tokens) return std::nullopt;
  return std::max(0, *prompt_tokens - *reused_tokens);
}

std::optional<double> TurnRow::prefill_ratio() const {
  auto p = prefilled_tokens();
  if (!p || !new_tokens || *new_tokens <= 0) return std::nullopt;
  return static_cast<double>(*p) / *new_tokens;
}

bool TurnRow::follow_up() const { return turn > 0 && kind != "cold" && kind != "warm"; }

std::optional<bool> TurnRow::target_met() const {
  auto p = prefilled_tokens();
  if (!follow_up() || !ok || interrupted || !p || !new_tokens) return std::nullopt;
  return MeetsTarget(*p, *new_tokens);
}

bool MeetsTarget(int prefilled, int n_new) { return prefilled <= 1.02 * n_new + 8; }

Json RowToJson(const TurnRow& r) {
  Json j;
  j["server"] = r.server;
  j["scenario"] = r.scenario;
  j["rep"] = r.rep;
  j["session"] = r.session;
  j["session_id"] = r.session_id;
  j["turn"] = r.turn;
  j["kind"] = r.kind;
  j["interrupted"] = r.interrupted;
  j["ok"] = r.ok;
  if (!r.error.empty()) j["error"] = r.error;
  j["prompt_tokens"] = OrNull(r.prompt_tokens);
  j["rendered_prompt_tokens"] = OrNull(r.rendered_prompt_tokens);
  j["reused_tokens"] = OrNull(r.reused_tokens);
  j["prefilled_tokens"] = OrNull(r.prefilled_tokens());
  j["new_tokens"] = OrNull(r.new_tokens);
  j["prefilled_per_new"] = OrNull(r.prefill_ratio());
  j["target_met"] = OrNull(r.target_met());
  j["completion_tokens"] = OrNull(r.completion_tokens);
  j["ttft_ms"] = OrNull(r.ttft_ms);
  j["e2e_ms"] = r.e2e_ms;
  j["decode_tps"] = OrNull(r.decode_tps);
  j["server_prefill_ms"] = OrNull(r.server_prefill_ms);
  j["usage_source"] = r.usage_source;
  j["reuse_tier"] = r.reuse_tier.empty() ? Json(nullptr) : Json(r.reuse_tier);
  if (!r.reuse_stopped.empty()) j["reuse_stopped"] = r.reuse_stopped;
  return j;
}

std::string CsvHeader() {
  return "server,scenario,rep,session,turn,kind,interrupted,ok,prompt_tokens,reused_tokens,prefilled_tokens,"
         "new_tokens,prefilled_per_new,target_met,completion_tokens,ttft_ms,e2e_ms,decode_tps,server_prefill_ms,"
         "usage_source,reuse_tier,error\n";
}

std::string CsvLine(const TurnRow& r) {
  auto tm = r.target_met();
  std::string s = CsvQuote(r.server) + "," + r.scenario + "," + std::to_string(r.rep) + "," + std::to_string(r.session) +
                  "," + std::to_string(r.turn) + "," + r.kind + "," + (r.interrupted ? "1" : "0") + "," +
                  (r.ok ? "1" : "0") + "," + Cell(r.prompt_tokens) + "," + Cell(r.reused_tokens) + "," +
                  Cell(r.prefilled_tokens()) + "," + Cell(r.new_tokens) + "," + Cell(r.prefill_ratio()) + "," +
                  (tm ? (*tm ? "1" : "0") : "") + "," + Cell(r.completion_tokens) + "," + Cell(r.ttft_ms) + "," +
                  Cell(std::optional<double>(r.e2e_ms)) + "," + Cell(r.decode_tps) + "," + Cell(r.server_prefill_ms) +
                  "," + r.usage_source + "," + r.reuse_tier + "," + CsvQuote(r.error) + "\n";
  return s;
}

namespace {

// One group's samples, summarized at the end.
struct GroupSamples {
  std::vector<double> ttft_f, ttft_0, e2e, tps, ratio, ttft_ideal, ttft_ideal_depth;
  long prefilled = 0, fresh = 0;
};

// A session's cold cost, from its first turn: ms per prefilled token, ms per decode step;
// and where the server's depth probe allows, the cost per token at depth 0 (`a`) and per
// token per position it attends over (`b`).
struct ColdCost {
  double ms_per_token = 0, step_ms = 0;
  std::optional<std::pair<double, double>> depth;  // {a, b}
};
using SessionKey = std::tuple<std::string, std::string, int, int>;  // server, scenario, rep, session

// How many times the depth probe's tokens a first turn must prefill to calibrate against it.
constexpr double kDepthFitSpan = 3.0;

// A cold prefill: `n` tokens after `d` cached ones took `ms` (TTFT less one decode step).
struct ColdPrefill {
  double n = 0, d = 0, ms = 0;
};

// What prefilling n tokens after d costs in units of a and b.
std::pair<double, double> DepthTerms(double n, double d) { return {n, n * d + n * n / 2}; }

// {a, b} from two cold prefills; nullopt when they cannot tell a from b (the same shape)
// or either comes out negative (noise larger than the depth's cost).
std::optional<std::pair<double, double>> SolveDepthCost(const ColdPrefill& p, const ColdPrefill& q) {
  const auto [p1, p2] = DepthTerms(p.n, p.d);
  const auto [q1, q2] = DepthTerms(q.n, q.d);
  const double det = p1 * q2 - p2 * q1;
  if (std::abs(det) < 1e-6 * std::abs(p1 * q2)) return std::nullopt;
  const double a = (p.ms * q2 - p2 * q.ms) / det;
  const double b = (p1 * q.ms - p.ms * q1) / det;
  if (a <= 0 || b < 0) return std::nullopt;
  return std::make_pair(a, b);
}

// Each server's depth probe: a cold prompt prefilled (nearly) whole, the fastest a token of
// its probes. Its TTFT holds one decode step, taken as the session's.
std::map<std::string, ColdPrefill> DepthProbes(const std::vector<TurnRow>& rows) {
  std::map<std::string, ColdPrefill> out;
  for (const TurnRow& r : rows) {
    if (r.scenario != kDepthProbeScenario || !r.ok || !r.ttft_ms || !r.prompt_tokens) continue;
    const auto prefilled = r.prefilled_tokens();
    // A probe the server had cached (a rerun with --no-nonce) tells nothing.
    if (!prefilled || *prefilled < 0.9 * *r.prompt_tokens) continue;
    const ColdPrefill probe{static_cast<double>(*prefilled), static_cast<double>(*r.prompt_tokens - *prefilled), *r.ttft_ms};
    // Of several probes, the fastest a token: a busy moment of the machine only slows one.
    if (auto [it, added] = out.emplace(r.server, probe); !added && probe.ms / probe.n < it->second.ms / it->second.n) {
      it->second = probe;
    }
  }
  return out;
}

std::map<SessionKey, ColdCost> ColdCosts(const std::vector<TurnRow>& rows) {
  const std::map<std::string, ColdPrefill> probes = DepthProbes(rows);
  std::map<SessionKey, ColdCost> cold;
  for (const TurnRow& r : rows) {
    if (!r.ok || r.interrupted || r.follow_up() || r.turn != 0 || !r.ttft_ms || !r.decode_tps || *r.decode_tps <= 0 ||
        r.scenario == kDepthProbeScenario) {
      continue;
    }
    const auto prefilled = r.prefilled_tokens();
    const double step = 1000.0 / *r.decode_tps;
    if (!prefilled || *prefilled <= 0 || *r.ttft_ms <= step || !r.prompt_tokens) continue;
    ColdCost c{(*r.ttft_ms - step) / *prefilled, step};
    // The probe and the first turn tell a from b only when one is several times the other:
    // within a few percent of noise two similar lengths would give any b at all.
    if (auto probe = probes.find(r.server);
        probe != probes.end() && probe->second.ms > step && *prefilled >= kDepthFitSpan * probe->second.n) {
      ColdPrefill p = probe->second;
      p.ms -= step;
      c.depth = SolveDepthCost(p, {static_cast<double>(*prefilled), static_cast<double>(*r.prompt_tokens - *prefilled),
                                   *r.ttft_ms - step});
    }
    cold[{r.server, r.scenario, r.rep, r.session}] = c;
  }
  return cold;
}

// Counts `r` into its group and its samples.
void AddToGroup(const TurnRow& r, const std::map<SessionKey, ColdCost>& cold, GroupSummary& g, GroupSamples& s) {
  ++g.n_turns;
  if (!r.ok) ++g.n_errors;
  if (r.interrupted) ++g.n_interrupted;
  if (!r.ok) return;
  if (r.ttft_ms && !r.interrupted) (r.follow_up() ? s.ttft_f : s.ttft_0).push_back(*r.ttft_ms);
  if (!r.interrupted) s.e2e.push_back(r.e2e_ms);
  if (r.decode_tps) s.tps.push_back(*r.decode_tps);
  if (!r.follow_up()) return;
  if (!r.reused_tokens && !r.interrupted) ++g.n_reuse_unknown;
  if (auto ratio = r.prefill_ratio(); ratio && !r.interrupted) {
    s.ratio.push_back(*ratio);
    s.prefilled += *r.prefilled_tokens();
    s.fresh += *r.new_tokens;
  }
  if (auto c = cold.find({r.server, r.scenario, r.rep, r.session});
      c != cold.end() && r.ttft_ms && !r.interrupted && r.new_tokens && *r.new_tokens > 0) {
    const ColdCost& cost = c->second;
    s.ttft_ideal.push_back(*r.ttft_ms / (*r.new_tokens * cost.ms_per_token + cost.step_ms));
    if (cost.depth && r.prompt_tokens && *r.prompt_tokens >= *r.new_tokens) {
      const auto [n, nd] = DepthTerms(*r.new_tokens, *r.prompt_tokens - *r.new_tokens);
      s.ttft_ideal_depth.push_back(*r.ttft_ms / (n * cost.depth->first + nd * cost.depth->second + cost.step_ms));
    }
  }
  if (auto met = r.target_met()) {
    ++g.n_target_checked;
    if (*met) ++g.n_target_met;
  }
}

}  // namespace

std::vector<GroupSummary> SummarizeGroups(const std::vector<TurnRow>& rows) {
  const std::map<SessionKey, ColdCost> cold = ColdCosts(rows);
  std::vector<GroupSummary> out;
  std::vector<GroupSamples> samples;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const TurnRow& r : rows) {
    if (r.scenario == kDepthProbeScenario) continue;
    auto [it, inserted] = index.emplace(std::make_pair(r.server, r.scenario), out.size());
    if (inserted) {
      out.push_back(GroupSummary{r.server, r.scenario});
      samples.emplace_back();
    }
    AddToGroup(r, cold, out[it->second], samples[it->second]);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const GroupSamples& s = samples[i];
    out[i].ttft_follow_up = Summarize(s.ttft_f);
    out[i].ttft_first = Summarize(s.ttft_0);
    out[i].e2e = Summarize(s.e2e);
    out[i].decode_tps = Summarize(s.tps);
    out[i].ratio = Summarize(s.ratio);
    out[i].ttft_vs_ideal = Summarize(s.ttft_ideal);
    out[i].ttft_vs_ideal_at_depth = Summarize(s.ttft_ideal_depth);
    if (s.fresh > 0) out[i].session_ratio = static_cast<double>(s.prefilled) / static_cast<double>(s.fresh);
  }
  return out;
}

namespace {

Json SpreadToJson(const std::optional<Spread>& s) {
  if (!s) return nullptr;
  return Json{{"n", s->n}, {"p50", s->p50}, {"p90", s->p90}, {"min", s->min}, {"max", s->max}, {"mean", s->mean}};
}

}  // namespace

Json GroupToJson(const GroupSummary& g) {
  Json j;
  j["server"] = g.server;
  j["scenario"] = g.scenario;
  j["turns"] = g.n_turns;
  j["errors"] = g.n_errors;
  j["interrupted"] = g.n_interrupted;
  j["ttft_first_ms"] = SpreadToJson(g.ttft_first);
  j["ttft_follow_up_ms"] = SpreadToJson(g.ttft_follow_up);
  j["ttft_vs_ideal"] = SpreadToJson(g.ttft_vs_ideal);
  j["ttft_vs_ideal_at_depth"] = SpreadToJson(g.ttft_vs_ideal_at_depth);
  j["e2e_ms"] = SpreadToJson(g.e2e);
  j["decode_tps"] = SpreadToJson(g.decode_tps);
  j["prefilled_per_new"] = SpreadToJson(g.ratio);
  j["session_prefilled_per_new"] = OrNull(g.session_ratio);
  j["target_checked"] = g.n_target_checked;
  j["target_met"] = g.n_target_met;
  return j;
}

std::vector<SessionSummary> SummarizeSessions(const std::vector<TurnRow>& rows) {
  std::vector<SessionSummary> out;
  std::map<std::tuple<std::string, std::string, int, int>, size_t> index;
  for (const TurnRow& r : rows) {
    if (r.kind == "cold" || r.kind == "warm") continue;
    auto [it, inserted] = index.emplace(std::make_tuple(r.server, r.scenario, r.rep, r.session), out.size());
    if (inserted) out.push_back(SessionSummary{r.server, r.scenario, r.session_id, r.rep, r.session});
    SessionSummary& s = out[it->second];
    if (!r.follow_up() || !r.ok || r.interrupted) continue;
    if (auto p = r.prefilled_tokens(); p && r.new_tokens) {
      s.n_prefilled += *p;
      s.n_new += *r.new_tokens;
    }
    if (auto met = r.target_met(); met && !*met && !s.first_missed_turn) s.first_missed_turn = r.turn;
  }
  for (SessionSummary& s : out) {
    if (s.n_new > 0) s.ratio = static_cast<double>(s.n_prefilled) / static_cast<double>(s.n_new);
  }
  return out;
}

}  // namespace hearth::bench
