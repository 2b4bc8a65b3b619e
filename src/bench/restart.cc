#include "bench/restart.h"

#include "bench/pressure.h"

namespace hearth::bench {
namespace {

std::string Cell(const std::optional<int>& v) { return v ? std::to_string(*v) : "?"; }
std::string Cell(const std::optional<double>& v) { return v ? FormatNumber(*v) : "-"; }

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '|' || c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

RestartSummary SummarizeRestart(const std::vector<TurnRow>& rows, const std::string& scenario) {
  std::map<int, RestartConversation> by_session;
  for (const TurnRow& r : rows) {
    if (r.scenario != scenario) continue;
    RestartConversation& c = by_session[r.session];
    c.session = r.session;
    if (r.turn == kRestartTurn - 1) c.before_ratio = r.prefill_ratio();
    if (r.turn != kRestartTurn) continue;
    c.ok = r.ok;
    c.prompt_tokens = r.prompt_tokens;
    c.reused_tokens = r.reused_tokens;
    c.prefilled_tokens = r.prefilled_tokens();
    c.new_tokens = r.new_tokens;
    c.ratio = r.prefill_ratio();
    c.source = r.ok ? ReuseSource(r) : "failed";
    c.reuse_stopped = r.reuse_stopped;
    if (const std::optional<bool> over = OverPressureLimit(r)) c.kept = !*over;
  }
  RestartSummary s;
  long prefilled = 0, fresh = 0;
  for (auto& [session, c] : by_session) {
    if (c.source == "failed") ++s.n_failed;
    if (c.kept) {
      ++s.n_judged;
      if (*c.kept) ++s.n_kept;
      ++s.sources[c.source];
      prefilled += *c.prefilled_tokens;
      fresh += *c.new_tokens;
    }
    s.conversations.push_back(std::move(c));
  }
  if (fresh > 0) s.ratio = static_cast<double>(prefilled) / static_cast<double>(fresh);
  return s;
}

std::string RestartVerdictLine(const RestartSummary& s) {
  std::string line = "restart kept " + std::to_string(s.n_kept) + " of " + std::to_string(s.conversations.size()) +
                     " conversations (reuse from " + SourcesText(s.sources);
  if (s.n_failed > 0) line += ", " + std::to_string(s.n_failed) + " failed requests";
  const int n_unjudged = static_cast<int>(s.conversations.size()) - s.n_judged - s.n_failed;
  if (n_unjudged > 0) line += ", " + std::to_string(n_unjudged) + " without cached-token counts";
  return line + ")";
}

std::string RestartMarkdown(const RestartSummary& s, const std::string& restart_cmd) {
  std::string md = "## Restart\n\n`" + restart_cmd + "` ran after turn " + std::to_string(kRestartTurn) +
                   " of every conversation; each conversation's turn " + std::to_string(kRestartTurn + 1) +
                   " came next. Kept: prefilled ≤ " + FormatNumber(kPressureLimit) + " × new.\n\n**" +
                   RestartVerdictLine(s) +
                   "**\n\n| conversation | before: prefilled÷new | after: prompt | reused | prefilled | new | "
                   "prefilled÷new | reuse from | kept | reuse stopped |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RestartConversation& c : s.conversations) {
    md += "| " + std::to_string(c.session) + " | " + Cell(c.before_ratio) + " | " + Cell(c.prompt_tokens) + " | " +
          Cell(c.reused_tokens) + " | " + Cell(c.prefilled_tokens) + " | " + Cell(c.new_tokens) + " | " + Cell(c.ratio) +
          " | " + (c.source.empty() ? "-" : c.source) + " | " + (c.kept ? (*c.kept ? "yes" : "no") : "?") + " | " +
          (c.reuse_stopped.empty() ? "-" : OneLine(c.reuse_stopped)) + " |\n";
  }
  return md;
}

}  // namespace hearth::bench
