// What a benchmark run measured: one row per request, and how rows are summarized.
//
// Quantities per row (each optional when the server or the run cannot give it):
//   prompt_tokens    the whole prompt (the server's usage, else the rendered count)
//   reused_tokens    prompt tokens the server reused from its cache (see usage.h)
//   prefilled_tokens prompt - reused: what the server computed at request time
//   new_tokens       what is new in the request (see render.h for the definition)
//   prefilled / new  1.0 is ideal; the cache issue's target is
//                    prefilled <= 1.02 * new + 8 on every follow-up turn.
//
// Thread safety: plain values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "bench/workload.h"

namespace hearth::bench {

// The scenario of a depth probe's row (Runner::DepthProbe): a cold prompt per server, sent
// before the scenarios and after, that calibrates the ideal at depth below (the faster
// one a token); it belongs to no group or session.
inline constexpr const char* kDepthProbeScenario = "probe";

struct TurnRow {
  std::string server;    // label
  std::string scenario;  // workload name, "replay", "sweep", kDepthProbeScenario
  int rep = 0;
  int session = 0;
  std::string session_id;
  int turn = 0;          // 0-based within the session
  std::string kind;      // "user", "tool", "replay", "cold", "warm"
  bool interrupted = false;
  bool ok = false;
  std::string error;
  std::optional<int> prompt_tokens;
  std::optional<int> rendered_prompt_tokens;
  std::optional<int> reused_tokens;
  std::optional<int> new_tokens;
  std::optional<int> completion_tokens;
  std::optional<double> ttft_ms;
  double e2e_ms = 0;
  std::optional<double> decode_tps;
  std::optional<double> server_prefill_ms;
  std::string usage_source;
  std::string reuse_tier;     // hearth: "device", "ram", "disk"; empty when not reported
  std::string reuse_stopped;  // hearth: why reuse ended where it did
  std::string prompt_text;  // the rendered request; kept in memory for diffs, not written

  std::optional<int> prefilled_tokens() const;
  // prefilled / new, when both are known and new > 0.
  std::optional<double> prefill_ratio() const;
  // Follow-up turns of sessions (not first turns, not sweep rows).
  bool follow_up() const;
  // The target on a follow-up turn; nullopt when it cannot be judged.
  std::optional<bool> target_met() const;
};

// The target, on its own: prefilled <= 1.02 * new + 8.
bool MeetsTarget(int prefilled, int n_new);

Json RowToJson(const TurnRow& r);
// CSV header and one line, same columns.
std::string CsvHeader();
std::string CsvLine(const TurnRow& r);

// Summary of one (server, scenario) group of rows.
struct GroupSummary {
  std::string server, scenario;
  int n_turns = 0, n_errors = 0, n_interrupted = 0;
  std::optional<Spread> ttft_follow_up, ttft_first, e2e, decode_tps, ratio;
  // Follow-up TTFT against its ideal: new tokens × the session's cold prefill time per
  // token (its first turn: (TTFT - one decode step) / prefilled) + one decode step. The
  // cache issue's target is <= 1.2, flat as the session grows.
  std::optional<Spread> ttft_vs_ideal;
  // The same against the cost of those tokens at their depth: prefilling n tokens after d
  // costs n·a + (n·d + n²/2)·b, attention growing with what it attends over, with a and b
  // solved from the server's depth probe (a cold prompt from position 0) and the session's
  // first turn, itself at least 3 times the probe's length. Empty without such a pair, or
  // where it does not give a > 0, b >= 0.
  std::optional<Spread> ttft_vs_ideal_at_depth;
  // Sum of prefilled over sum of new, follow-up turns only.
  std::optional<double> session_ratio;
  int n_target_checked = 0, n_target_met = 0;
  int n_reuse_unknown = 0;
};

std::vector<GroupSummary> SummarizeGroups(const std::vector<TurnRow>& rows);
// One group as summary.json holds it: the counts, and each spread as {n, p50, p90, min,
// max, mean} or null when it had no samples (what scripts read instead of summary.md).
Json GroupToJson(const GroupSummary& g);

// prefilled / new over one session's follow-up turns, and where reuse first broke.
struct SessionSummary {
  std::string server, scenario, session_id;
  int rep = 0, session = 0;
  long n_prefilled = 0, n_new = 0;  // follow-up turns with both known
  std::optional<double> ratio;
  std::optional<int> first_missed_turn;  // first follow-up turn that missed the target
};

std::vector<SessionSummary> SummarizeSessions(const std::vector<TurnRow>& rows);

}  // namespace hearth::bench
