// The restart probe of `hearth bench --diagnose --restart-cmd CMD`: does a server keep its
// cache across a restart?
//
// The probe runs kRestartConversations conversations (or --sessions), each with its own
// system prompt (workload.h's kPressure), kRestartTurn turns of each, one of each in turn;
// then CMD restarts the server (on the same cache directory: that is the user's part),
// the bench waits for /health, and each conversation sends its next follow-up. That
// follow-up is judged as the pressure probe judges one (pressure.h): the conversation was
// kept when it prefilled at most kPressureLimit × its new tokens. Where its reuse came from
// is hearth's `usage.hearth_cache.tier` (disk, after a restart; RAM or device would mean
// the server did not restart).
//
// Thread safety: pure functions over plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/results.h"

namespace hearth::bench {

constexpr int kRestartConversations = 4;
// 0-based turn of each conversation that comes first after the restart; each has this
// many turns before it, and one after.
constexpr int kRestartTurn = 2;
// Each conversation's length at its last turn, most of it the system prompt.
constexpr int kRestartConversationTokens = 1200;

// One conversation's follow-up after the restart.
struct RestartConversation {
  int session = 0;
  std::optional<double> before_ratio;  // prefilled ÷ new of the turn before the restart
  bool ok = false;                     // the follow-up succeeded
  std::optional<int> prompt_tokens, reused_tokens, prefilled_tokens, new_tokens;
  std::optional<double> ratio;
  std::string source;         // ReuseSource (pressure.h)
  std::string reuse_stopped;  // hearth: why reuse stopped short
  std::optional<bool> kept;   // nullopt: could not be judged (failed, counts unknown)
};

struct RestartSummary {
  std::vector<RestartConversation> conversations;  // by session
  int n_kept = 0, n_judged = 0, n_failed = 0;
  std::map<std::string, int> sources;  // of the judged follow-ups
  std::optional<double> ratio;         // prefilled ÷ new over the judged follow-ups
};

// The rows of scenario `scenario` (one server's), turn kRestartTurn of each session, and
// the turn before it.
RestartSummary SummarizeRestart(const std::vector<TurnRow>& rows, const std::string& scenario);

// "restart kept 3 of 4 conversations (reuse from disk 3, none 1)", with failed requests.
std::string RestartVerdictLine(const RestartSummary& s);

// Markdown: the verdict line, then one row per conversation.
std::string RestartMarkdown(const RestartSummary& s, const std::string& restart_cmd);

}  // namespace hearth::bench
