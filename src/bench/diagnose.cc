// hearth bench --diagnose: one short probe per cache failure mode, and a verdict table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench/bench.h"
#include "bench/pressure.h"
#include "bench/render.h"
#include "bench/restart.h"

namespace hearth::bench {
namespace {

struct Probe {
  std::string name;
  std::string what;  // the failure mode it looks for
  Scenario scenario;
  int n_turns;
  int n_sessions = 1;
  int interrupt_every = 3;
  bool restart = false;
  std::string restart_cmd;  // restart probe: what restarts the server
  // Memory pressure: conversations of this many tokens each, and follow-ups are judged
  // against kPressureLimit instead of the target.
  std::optional<int> pressure_tokens;
};

struct Verdict {
  std::string probe, what;
  std::optional<double> ratio;
  std::optional<int> broke_at;  // 1-based turn
  std::string differed;
  std::string verdict;
};

const TurnRow* FindRow(const std::vector<TurnRow>& rows, const TurnRow& like, int turn) {
  for (const TurnRow& r : rows) {
    if (r.scenario == like.scenario && r.session == like.session && r.rep == like.rep && r.turn == turn) return &r;
  }
  return nullptr;
}

std::string DescribeDiff(const TurnRow& prev, const TurnRow& next) {
  if (prev.prompt_text.empty() || next.prompt_text.empty()) return "(prompts not rendered)";
  const PromptDiff d = DiffPrompts(prev.prompt_text, next.prompt_text);
  if (d.prev_is_prefix) {
    return "turn " + std::to_string(prev.turn + 1) + "'s prompt is intact; after it now comes «" + EscapeForLine(d.next_text) +
           "» (the reply as sent back did not match what the server generated, or the server dropped its state)";
  }
  return "byte " + std::to_string(d.offset) + ", after «…" + EscapeForLine(d.context.substr(d.context.size() > 30 ? d.context.size() - 30 : 0)) +
         "»: turn " + std::to_string(prev.turn + 1) + " had «" + EscapeForLine(d.prev_text.substr(0, 40)) + "», turn " +
         std::to_string(next.turn + 1) + " has «" + EscapeForLine(d.next_text.substr(0, 40)) + "»";
}

// The pressure probe: how many follow-ups prefilled more than kPressureLimit × new, where
// their reuse came from, and, for the first, why hearth says reuse stopped.
Verdict JudgePressure(const Probe& p, const std::vector<TurnRow>& rows, const std::vector<std::string>& servers) {
  Verdict v{p.name, p.what};
  const PressureShape shape{p.n_sessions, *p.pressure_tokens, p.n_turns};
  std::vector<TurnRow> mine;
  for (const TurnRow& r : rows) {
    if (r.scenario != p.name) continue;
    mine.push_back(r);
    mine.back().scenario = PressureName(shape);
  }
  const std::vector<PressurePoint> points = SummarizePressure(mine, {shape}, servers, std::nullopt);
  if (points.empty() || points[0].n_follow_ups == 0) {
    v.verdict = "unknown: no follow-up could be judged (no cached-token count, or every request failed)";
    return v;
  }
  const PressurePoint& pt = points[0];
  v.ratio = pt.ratio;
  const std::string sources = SourcesText(pt.sources);
  for (const TurnRow& r : mine) {
    if (OverPressureLimit(r) != std::optional<bool>(true)) continue;
    v.broke_at = r.turn + 1;
    v.differed = "conversation " + std::to_string(r.session) + ": prefilled " + std::to_string(*r.prefilled_tokens()) +
                 " for " + std::to_string(*r.new_tokens) + " new, reuse from " + ReuseSource(r) +
                 (r.reuse_stopped.empty() ? "" : ", reuse stopped: " + EscapeForLine(r.reuse_stopped));
    break;
  }
  const std::string errors = pt.n_failed > 0 ? ", " + std::to_string(pt.n_failed) + " failed requests" : "";
  v.verdict = (pt.n_over == 0 ? "ok: " : "reuse lost: ") + std::to_string(pt.n_over) + " of " +
              std::to_string(pt.n_follow_ups) + " follow-ups over " + FormatNumber(kPressureLimit) + " (reuse from " +
              sources + errors + ")";
  return v;
}

Verdict Judge(const Probe& p, const std::vector<TurnRow>& rows) {
  Verdict v{p.name, p.what};
  long prefilled = 0, fresh = 0;
  int n_checked = 0, n_unknown = 0, n_errors = 0;
  const TurnRow* broke = nullptr;
  for (const TurnRow& r : rows) {
    if (r.scenario != p.name) continue;
    if (!r.ok) ++n_errors;
    if (!r.follow_up() || !r.ok || r.interrupted) continue;
    auto met = r.target_met();
    if (!met) {
      ++n_unknown;
      continue;
    }
    ++n_checked;
    prefilled += *r.prefilled_tokens();
    fresh += *r.new_tokens;
    if (!*met && broke == nullptr) broke = &r;
  }
  if (fresh > 0) v.ratio = static_cast<double>(prefilled) / static_cast<double>(fresh);
  if (broke != nullptr) {
    v.broke_at = broke->turn + 1;
    if (const TurnRow* prev = FindRow(rows, *broke, broke->turn - 1)) v.differed = DescribeDiff(*prev, *broke);
  }
  const std::string errors = n_errors > 0 ? " (" + std::to_string(n_errors) + " failed requests)" : "";
  if (n_checked == 0) {
    v.verdict = n_unknown > 0 ? "unknown: the server reports no cached-token count" : "no result" + errors;
  } else if (broke == nullptr) {
    v.verdict = "ok: reuse holds" + errors;
  } else {
    v.verdict = "reuse breaks" + errors;
  }
  return v;
}

// The restart probe: every conversation's follow-up after the restart (restart.h).
// `restart_failed` says why the restart itself went wrong, when it did.
Verdict JudgeRestart(const Probe& p, const std::vector<TurnRow>& rows, const std::string& restart_failed,
                     std::string* markdown) {
  Verdict v{p.name, p.what};
  const RestartSummary s = SummarizeRestart(rows, p.name);
  *markdown = RestartMarkdown(s, p.restart_cmd);
  v.ratio = s.ratio;
  for (const RestartConversation& c : s.conversations) {
    if (c.kept != std::optional<bool>(false)) continue;
    v.broke_at = kRestartTurn + 1;
    v.differed = "conversation " + std::to_string(c.session) + ": prefilled " + std::to_string(*c.prefilled_tokens) +
                 " for " + std::to_string(*c.new_tokens) + " new, reuse from " + c.source +
                 (c.reuse_stopped.empty() ? "" : ", reuse stopped: " + EscapeForLine(c.reuse_stopped));
    break;
  }
  const bool all_kept = s.n_judged > 0 && s.n_kept == static_cast<int>(s.conversations.size());
  // A restarted server's device and RAM tiers start empty.
  const bool not_restarted = s.sources.count("device") > 0 || s.sources.count("ram") > 0;
  std::string head = all_kept ? "ok: " : s.n_judged == 0 ? "unknown: " : "reuse lost: ";
  if (not_restarted) head = "not restarted? reuse came from the device or RAM tier after the command: ";
  if (!restart_failed.empty()) head = restart_failed + "; ";
  v.verdict = head + RestartVerdictLine(s);
  return v;
}

// Runs `cmd`, which restarts the server, then waits until /health answers. Returns why
// that failed, or "" when the server is back.
std::string Restart(const std::string& cmd, const ServerClient& client) {
  std::fprintf(stderr, "hearth bench: restarting the server: %s\n", cmd.c_str());
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    const std::string why = "the restart command failed (status " + std::to_string(rc) + ")";
    std::fprintf(stderr, "hearth bench: %s\n", why.c_str());
    return why;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 600; ++i) {
    if (client.GetJson("/health").ok()) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "hearth bench: the server answers /health again, %.1f s after the command returned\n", s);
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::fprintf(stderr, "hearth bench: the server did not answer /health within 300 s\n");
  return "the server did not answer /health within 300 s of the restart";
}

// Every probe, sized from the config and the server's device cells (when known).
std::vector<Probe> AllProbes(const BenchConfig& config, std::optional<int> cells) {
  const int n_evict = config.spec.n_sessions > 1 ? config.spec.n_sessions : 6;
  const int n_pressure = config.spec.n_sessions > 1 ? config.spec.n_sessions : 8;
  // Four times the device cells when they are known, else about 2.5 times hearth's default.
  const int pressure_tokens = cells ? std::max(PressureShape{}.conversation_tokens, 4 * *cells / n_pressure)
                                    : PressureShape{}.conversation_tokens;
  Probe pressure{"pressure",
                 std::to_string(n_pressure) + " conversations of ~" + std::to_string(pressure_tokens) +
                     " tokens, own system prompts, round-robin",
                 Scenario::kPressure, PressureShape{}.n_turns, n_pressure};
  pressure.pressure_tokens = pressure_tokens;
  const int n_restart = config.spec.n_sessions > 1 ? config.spec.n_sessions : kRestartConversations;
  Probe restart{"restart",
                std::to_string(n_restart) + " conversations, " + std::to_string(kRestartTurn) +
                    " turns each, the server restarted, then each one's next turn",
                Scenario::kPressure, kRestartTurn + 1, n_restart};
  restart.restart = true;
  restart.restart_cmd = config.restart_cmd;
  restart.pressure_tokens = kRestartConversationTokens;
  return {
      {"baseline", "plain chat, nothing unusual", Scenario::kChat, 4},
      {"volatile-line", "a request id and timestamp early in the system prompt", Scenario::kVolatile, 4},
      {"interrupted-reply", "a reply cut off mid-stream and sent back partial", Scenario::kInterrupt, 4, 1, 2},
      {"thinking", "earlier <think> blocks re-rendered differently", Scenario::kChatThink, 4},
      {"tool-calls", "assistant tool calls re-serialized, loop re-rendered at the next user turn", Scenario::kAgent, 6},
      {"eviction", std::to_string(n_evict) + " conversations interleaved", Scenario::kInterleaved, 3, n_evict},
      restart,
      pressure,
  };
}

// The probes `names` asks for, in `all`'s order (every one when `names` is empty);
// nullopt, with a message, when it names a probe that does not exist.
std::optional<std::vector<Probe>> SelectProbes(const std::vector<Probe>& all, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (std::none_of(all.begin(), all.end(), [&](const Probe& p) { return p.name == name; })) {
      std::string known;
      for (const Probe& p : all) known += (known.empty() ? "" : ", ") + p.name;
      std::fprintf(stderr, "hearth bench: no probe '%s' (probes: %s)\n", name.c_str(), known.c_str());
      return std::nullopt;
    }
  }
  std::vector<Probe> out;
  for (const Probe& p : all) {
    if (names.empty() || std::find(names.begin(), names.end(), p.name) != names.end()) out.push_back(p);
  }
  return out;
}

// Runs probe `p` (its workload seeded `seed`) and judges it; the restart probe also
// writes its table to `restart_md`.
Verdict RunProbe(const Probe& p, const BenchConfig& config, uint64_t seed, Runner& runner, const ServerClient& client,
                 std::string* restart_md) {
  if (p.restart && config.restart_cmd.empty()) {
    return {p.name, p.what, std::nullopt, std::nullopt, "",
            "skipped: pass --restart-cmd CMD (restarts the server, e.g. `systemctl restart X`) if it "
            "keeps its cache across restarts"};
  }
  std::fprintf(stderr, "hearth bench: probe %s: %s\n", p.name.c_str(), p.what.c_str());
  WorkloadSpec spec = config.spec;
  spec.scenario = p.scenario;
  spec.n_turns = p.n_turns;
  spec.n_sessions = p.n_sessions;
  spec.interrupt_every = p.interrupt_every;
  spec.seed = seed;
  if (p.pressure_tokens) spec = PressureSpec(spec, {p.n_sessions, *p.pressure_tokens, p.n_turns});
  Workload w = MakeWorkload(spec);
  w.name = p.name;
  std::string restart_failed;
  if (p.restart) {
    // Conversations go one turn of each in turn: the first to reach kRestartTurn is session 0.
    runner.SetBeforeTurn([&](int session, int turn) {
      if (turn == kRestartTurn && session == 0) restart_failed = Restart(p.restart_cmd, client);
    });
  }
  runner.Run(w);
  runner.SetBeforeTurn(nullptr);
  if (p.restart) return JudgeRestart(p, runner.rows(), restart_failed, restart_md);
  if (p.pressure_tokens) return JudgePressure(p, runner.rows(), {runner.targets()[0].label});
  return Judge(p, runner.rows());
}

std::string DiagnosisMarkdown(const std::string& url, const std::vector<Verdict>& verdicts,
                              const std::string& restart_md) {
  std::string md = "## Diagnosis of " + url +
                   "\n\nEach probe is a short session; a follow-up turn passes when prefilled ≤ 1.02 × new + 8 "
                   "(pressure: when prefilled ≤ 1.05 × new).\n\n"
                   "| probe | looks for | prefilled÷new | reuse broke at turn | what differed | verdict |\n"
                   "|---|---|---|---|---|---|\n";
  for (const Verdict& v : verdicts) {
    md += "| " + v.probe + " | " + v.what + " | " + (v.ratio ? FormatNumber(*v.ratio) : "-") + " | " +
          (v.broke_at ? std::to_string(*v.broke_at) : "-") + " | " + (v.differed.empty() ? "-" : v.differed) + " | " +
          v.verdict + " |\n";
  }
  if (!restart_md.empty()) md += "\n" + restart_md;
  return md;
}

}  // namespace

int RunDiagnose(const BenchConfig& config) {
  Runner runner(config.targets, config.render, config.run);
  if (Status s = runner.Start(); !s.ok()) {
    std::fprintf(stderr, "hearth bench: %s\n", s.message().c_str());
    return 1;
  }
  const auto probes = SelectProbes(AllProbes(config, DeviceCells(config, runner.Environment())), config.probes);
  if (!probes) return 1;
  auto ep = ParseEndpoint(config.targets[0].url);
  const ServerClient client(*ep, config.run.api_key, 30);
  std::vector<Verdict> verdicts;
  std::string restart_md;
  for (const Probe& p : *probes) {
    verdicts.push_back(RunProbe(p, config, config.spec.seed + verdicts.size(), runner, client, &restart_md));
  }
  BenchConfig c = config;
  c.print_turns = false;
  return FinishRun(c, runner, DiagnosisMarkdown(config.targets[0].url, verdicts, restart_md), {});
}

}  // namespace hearth::bench
