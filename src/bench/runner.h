// Runner: drives workloads, recorded sessions and the cold/warm sweep against one or
// more servers, and collects one TurnRow per request.
//
// Several servers are measured alternately (session by session, or turn by turn), each
// keeping its own copy of every conversation, since their replies differ. New tokens are
// counted through one renderer for all of them (render.h), so the same conversation
// gets the same count whichever server it ran on.
//
// Thread safety: one thread. Requests are sent one at a time, in workload order.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/client.h"
#include "bench/render.h"
#include "bench/results.h"
#include "bench/usage.h"
#include "bench/wire.h"
#include "bench/workload.h"

namespace hearth::bench {

struct Target {
  std::string label;  // "hearth", "llama-server", or host:port
  std::string url;
};

enum class Alternate { kSession, kTurn };

struct RenderSource {
  std::string url;
  std::string model_path;
};

struct RunOptions {
  Flavor flavor = Flavor::kOpenAI;
  std::string api_key;
  std::string model;  // request "model"; empty: ask each server's /v1/models
  double timeout_s = 600;
  bool send_reasoning = false;  // send reasoning_content back with earlier replies
  std::optional<double> temperature = 0.0;
  int warmup = 1;               // untimed requests per server before measuring
  Alternate alternate = Alternate::kSession;
  bool progress = true;         // one line per request on stderr
  // Pause before each follow-up turn of a workload session, counted from the end of that
  // session's previous reply: a person reading it, an agent running its tool. Turns of
  // other sessions sent meanwhile count towards it. Zero: at once. Not used by Replay or
  // Sweep, whose requests have no reply to think about.
  std::chrono::milliseconds think{0};
  // The same pause before the follow-ups that add a user message only (a person answering;
  // tool results still go after `think`): the longer of the two applies there.
  std::chrono::milliseconds user_think{0};
  // Send each workload session's id (with the run's nonce) as its session key (wire.h).
  bool send_session_key = false;
};

// The pause before a follow-up turn: `think`, or for one that adds a user message the
// longer of `think` and `user_think`.
std::chrono::milliseconds FollowUpPause(const TurnPlan& turn, const RunOptions& options);

// How long to wait before a follow-up whose previous reply ended at `replied_at`, so that
// `think` has passed when it is sent: zero when it already has.
std::chrono::milliseconds ThinkWait(std::chrono::steady_clock::time_point replied_at,
                                    std::chrono::steady_clock::time_point now, std::chrono::milliseconds think);

// One line of a replay file: a request body, and the conversation it belongs to.
struct ReplayLine {
  std::string session;  // lines of one session are consecutive turns of it
  RecordedRequest request;
};
// Reads JSONL: each line a request body, or {"session": ID, "body": {...}}. Lines without
// a session all belong to one conversation. Errors name the line.
StatusOr<std::vector<ReplayLine>> ReadReplayFile(const std::string& path, std::optional<Flavor> flavor);

class Runner {
 public:
  // New tokens are counted with the model file `render.model_path` when set (local_render.h),
  // else through `render.url`'s /apply-template and /tokenize (empty: the first target's).
  Runner(std::vector<Target> targets, RenderSource render, RunOptions options);
  ~Runner();

  // Checks every server answers, learns model ids and versions, probes the renderer and
  // warms up. Errors: kUnavailable naming the server that does not answer.
  Status Start();

  // Runs `workload` once on every server.
  void Run(const Workload& workload);
  // Sends recorded requests in order; `max_tokens` caps their replies when set.
  void Replay(const std::vector<ReplayLine>& lines, std::optional<int> max_tokens);
  // For each size: a prompt no server has seen (cold), then, with `warm`, the same prompt
  // again (warm).
  void Sweep(const std::vector<int>& sizes, uint64_t seed, int rep, bool warm = true);
  // One cold prompt of about `n_tokens` per server, no server can have cached (a nonce
  // from `seed` comes first): a row of scenario kDepthProbeScenario, from which with each
  // session's first turn results.h tells the prefill's cost at depth 0 from its growth
  // with depth (GroupSummary::ttft_vs_ideal_at_depth).
  void DepthProbe(int n_tokens, uint64_t seed);

  // Called before each turn of Run (session, turn); diagnose uses it to restart a server.
  void SetBeforeTurn(std::function<void(int session, int turn)> hook) { before_turn_ = std::move(hook); }

  const std::vector<TurnRow>& rows() const { return rows_; }
  // CPU, model, servers (versions, props), options, renderer: for env.json.
  Json Environment() const;
  // Warnings worth keeping with the results (printed as they happen, too).
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<Target>& targets() const { return targets_; }

 private:
  struct Server;
  struct Conversation;

  void RunStep(Server& server, const Workload& w, int session, int turn);
  TurnRow Send(Server& server, const ChatRequest& request, int n_carried, std::optional<int> cut_after,
               std::string scenario, std::string kind, ChatOutcome* outcome);
  TurnRow SendBody(Server& server, Flavor flavor, const Json& body, const ChatRequest& canonical, int n_carried,
                   std::optional<int> cut_after, ChatOutcome* outcome);
  Status StartRenderer();
  std::string RenderName() const;
  void Note(std::string note);
  void Progress(const TurnRow& row, int n_turns) const;
  std::vector<Server*> ServerOrder(int rep);

  std::vector<Target> targets_;
  RenderSource render_;
  RunOptions options_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<ServerClient> render_client_;
  std::unique_ptr<RenderBackend> render_backend_;
  std::unique_ptr<NewTokenCounter> counter_;
  bool render_failed_ = false;
  std::function<void(int, int)> before_turn_;
  std::vector<TurnRow> rows_;
  std::vector<std::string> notes_;
};

}  // namespace hearth::bench
