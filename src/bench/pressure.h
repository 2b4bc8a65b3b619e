// Memory pressure: conversations whose total size is several times the server's device
// cells (its KV cells, `-c`), one turn of each in turn, and how much each follow-up had to
// prefill again because its conversation's state was pushed out.
//
// One pressure point is N conversations of about L tokens each (workload.h's kPressure:
// each with its own system prompt, most of the length), T turns. For each follow-up the
// bench records prefilled ÷ new (new as everywhere in the bench, render.h: what the request
// adds after the previous request and the reply the server generated) and where the reuse
// came from: hearth says which tier (`usage.hearth_cache.tier`: device, RAM, disk); other
// servers say only how many tokens were cached ("unreported"). A sweep runs a grid of
// points; its plot puts prefilled ÷ new against working set ÷ device cells, per server.
//
// The working set of a point is the sum over its conversations of their longest prompt
// plus its reply, as the server counted them: what a server would have to hold to never
// prefill anything twice.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/results.h"
#include "bench/workload.h"

namespace hearth::bench {

// A follow-up is flagged when it prefilled more than this many times its new tokens.
constexpr double kPressureLimit = 1.05;

struct PressureShape {
  int n_conversations = 8;
  int conversation_tokens = 2400;  // each conversation's length at its last turn
  int n_turns = 4;
};

// The workload spec for one point: `base`'s seed, rep, nonce, user and reply sizes, with
// the shape's conversations, length and turns. REQUIRES: shape fields >= 1.
WorkloadSpec PressureSpec(const WorkloadSpec& base, const PressureShape& shape);
// The rows' scenario name for a point: "pressure-8x2400".
std::string PressureName(const PressureShape& shape);

// Where one follow-up's reuse came from: "device", "ram", "disk" (hearth's report),
// "none" (nothing reused), "unreported" (reused, but the server does not say from where),
// or "unknown" (no cached-token count at all).
std::string ReuseSource(const TurnRow& row);
// ReuseSource counts as "device 20, ram 3, none 1", in that fixed order; "-" when empty.
std::string SourcesText(const std::map<std::string, int>& sources);
// prefilled ÷ new > kPressureLimit. nullopt when the row is no follow-up, failed, was cut,
// or either count is unknown.
std::optional<bool> OverPressureLimit(const TurnRow& row);

struct PressurePoint {
  std::string server;
  PressureShape shape;
  int n_follow_ups = 0;        // judged: both counts known
  int n_over = 0;              // of those, over kPressureLimit
  int n_failed = 0;            // requests that ended in an error
  long n_prefilled = 0, n_new = 0;
  std::optional<double> ratio;  // n_prefilled ÷ n_new over the judged follow-ups
  long working_set_tokens = 0;
  std::optional<double> pressure;  // working set ÷ device cells, when the cells are known
  std::map<std::string, int> sources;  // ReuseSource of each judged follow-up, counted
};

// One point per (server, shape) among `rows`, in `shapes` then `servers` order; points
// without rows are left out. `device_cells` unset: no pressure figure.
std::vector<PressurePoint> SummarizePressure(const std::vector<TurnRow>& rows, const std::vector<PressureShape>& shapes,
                                             const std::vector<std::string>& servers, std::optional<int> device_cells);

// Markdown: the points' table; with `follow_ups`, also one line per flagged follow-up
// (conversation, turn, counts, source, and why hearth says reuse stopped).
std::string PressureMarkdown(const std::vector<PressurePoint>& points, const std::vector<TurnRow>& rows,
                             std::optional<int> device_cells, bool follow_ups);

}  // namespace hearth::bench
