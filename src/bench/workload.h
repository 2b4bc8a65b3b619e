// Benchmark workloads: scripted multi-turn sessions, deterministic from a seed and sized
// in tokens, plus the cold/warm sweep prompts.
//
// A session is a list of turns; each turn is one request. The conversation itself (what
// each request carries) is built while the benchmark runs, because it contains the
// server's replies: turn t's request is the previous request's messages, then the
// previous reply *as the client sends it back*, then this turn's added messages.
//
// The previous reply as sent back is, depending on the workload:
//  - the model's own reply (content only; reasoning is dropped unless the run asks to
//    send it back, as most OpenAI clients do),
//  - the part streamed before the client cut the connection (interrupted turns),
//  - a scripted assistant message with tool calls (agent loop). The test models have
//    random weights and never emit a usable tool call, so the client plays the agent:
//    it replaces the reply with the tool call a coding agent would make, then sends the
//    tool's result. The server sees exactly what a real agent loop would send. Since the
//    server never generated that tool call, it counts as new in the next request.
//
// Thread safety: plain values.
//
// Invariants:
//  1. The same WorkloadSpec (seed included) gives the same Workload, byte for byte.
//  2. In every session, turn 0 has a user message and turns are numbered 0..n-1.
//  3. `order` lists every (session, turn) exactly once, each session's turns ascending.
//  4. kPressure: the sessions' system prompts differ from their first word on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace hearth::bench {

// Key order is kept: tool-call arguments and schemas go out exactly as generated.
using Json = nlohmann::ordered_json;
// Compact JSON text; invalid UTF-8 (a model's raw output can hold some) becomes U+FFFD.
std::string DumpJson(const Json& j);

enum class Scenario {
  kChat,         // plain chat, thinking off
  kChatThink,    // plain chat, thinking on
  kAgent,        // coding agent: tool definitions, scripted tool calls and results
  kInterrupt,    // every third reply cut off mid-stream and sent back partial
  kVolatile,     // a request id and timestamp line at the top of the system prompt
  kInterleaved,  // several conversations, one turn of each in turn
  kGrow,         // pasted documents grow the context to a target length
  // Memory pressure: several conversations, each with its own system prompt, one turn of
  // each in turn; sized by context_tokens (each conversation's length at its last turn),
  // most of it the system prompt. Not part of AllScenarios(): it is meant to outgrow the
  // server's device cells, so it runs on its own (bench --pressure, pressure.h).
  kPressure,
};

const char* ScenarioName(Scenario s);
StatusOr<Scenario> ParseScenario(const std::string& name);
// Every session scenario, in the order above (kPressure excepted).
std::vector<Scenario> AllScenarios();

struct WorkloadSpec {
  Scenario scenario = Scenario::kChat;
  int n_turns = 8;
  int n_sessions = 1;        // kInterleaved and kPressure use 8 when this is 1
  int system_tokens = 300;   // system prompt, without tool definitions
  int user_tokens = 120;     // each user message (tool results are sized alike)
  int context_tokens = 0;    // >0: size messages so the last prompt is about this long
  int max_tokens = 48;       // reply length asked for
  int interrupt_every = 3;   // kInterrupt: every Nth reply is cut off...
  int interrupt_after = 12;  // ...after this many streamed pieces of text
  uint64_t seed = 1;
  int rep = 0;               // repetitions differ in content, not in shape
  // Put at the top of each session's first user message, so that a rerun with the same
  // seed cannot hit what the server cached from the last run. Empty: none.
  std::string nonce;
};

// One request of a session.
struct TurnPlan {
  int turn = 0;
  // What this request adds after the previous reply: a user message, or tool results.
  std::vector<Json> added;
  // Replaces the system prompt from this turn on (kVolatile).
  std::optional<std::string> system;
  // Replaces this turn's reply when it is sent back (a scripted tool call).
  std::optional<Json> scripted_reply;
  // Cut this turn's reply after interrupt_after pieces of streamed text.
  bool interrupt = false;
  bool tool_results = false;  // `added` holds tool results, not a user message
};

struct SessionPlan {
  std::string id;
  std::string system;  // initial system prompt
  Json tools = Json::array();  // OpenAI "tools" array; empty when none
  bool thinking = false;
  std::vector<TurnPlan> turns;
};

struct Workload {
  std::string name;  // the scenario's name
  WorkloadSpec spec;
  std::vector<SessionPlan> sessions;
  std::vector<std::pair<int, int>> order;  // (session, turn) in the order they are sent
};

// Builds the workload for `spec`. REQUIRES: n_turns >= 1, n_sessions >= 1.
Workload MakeWorkload(const WorkloadSpec& spec);

// The coding agent's tool definitions (OpenAI "tools" shape).
Json AgentTools();

// One cold/warm sweep prompt: a conversation about `n_tokens` long that no server can
// have cached, because it starts with a nonce drawn from `seed`.
struct SweepPrompt {
  int target_tokens = 0;
  std::vector<Json> messages;
};
SweepPrompt MakeSweepPrompt(int n_tokens, uint64_t seed);

}  // namespace hearth::bench
