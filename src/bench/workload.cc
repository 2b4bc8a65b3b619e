#include "bench/workload.h"

#include <algorithm>
#include <ctime>

#include "bench/agent_script.h"
#include "bench/text.h"

namespace hearth::bench {
namespace {

constexpr Scenario kAll[] = {Scenario::kChat,     Scenario::kChatThink,   Scenario::kAgent, Scenario::kInterrupt,
                             Scenario::kVolatile, Scenario::kInterleaved, Scenario::kGrow};

Json UserMessage(std::string text) { return Json{{"role", "user"}, {"content", std::move(text)}}; }

std::string ChatSystem(Rng& rng, int n_tokens) {
  return "You are a careful assistant for a software team. Answer precisely, say when you are unsure, "
         "and keep answers short unless asked otherwise.\n\n" +
         Prose(rng, std::max(16, n_tokens - 30));
}

// "Request-Id: <uuid> / Date: 2026-...Z": different on every turn, at the very top.
std::string VolatileLine(uint64_t seed, int session, int turn) {
  Rng rng(MixSeed(seed, 0x766f6c, static_cast<uint64_t>(session), static_cast<uint64_t>(turn)));
  const std::time_t t = 1780000000 + static_cast<std::time_t>(turn) * 37 + static_cast<std::time_t>(rng.Range(0, 9));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string id = HexId(rng, 32);  // a version-4 UUID, as most clients make them
  id[12] = '4';
  id = id.substr(0, 8) + "-" + id.substr(8, 4) + "-" + id.substr(12, 4) + "-" + id.substr(16, 4) + "-" + id.substr(20);
  return "Request-Id: " + id + "\nDate: " + when + "\n\n";
}

// Tokens for each turn's added content: equal shares, or growing shares (kGrow), so the
// last prompt is about spec.context_tokens long when that is set.
std::vector<int> TurnBudgets(const WorkloadSpec& spec, int fixed_tokens) {
  std::vector<int> out(static_cast<size_t>(spec.n_turns), spec.user_tokens);
  if (spec.context_tokens <= 0) {
    if (spec.scenario == Scenario::kGrow) {
      for (int t = 0; t < spec.n_turns; ++t) out[static_cast<size_t>(t)] = spec.user_tokens * (t + 1);
    }
    return out;
  }
  const int room = std::max(16 * spec.n_turns, spec.context_tokens - fixed_tokens - spec.n_turns * spec.max_tokens);
  if (spec.scenario == Scenario::kGrow) {
    const int weight_sum = spec.n_turns * (spec.n_turns + 1) / 2;
    for (int t = 0; t < spec.n_turns; ++t) out[static_cast<size_t>(t)] = std::max(16, room * (t + 1) / weight_sum);
  } else {
    for (int& b : out) b = std::max(16, room / spec.n_turns);
  }
  return out;
}

SessionPlan ChatSession(const WorkloadSpec& spec, int session, const std::string& system) {
  SessionPlan s;
  s.id = std::string(ScenarioName(spec.scenario)) + "-r" + std::to_string(spec.rep) + "-s" + std::to_string(session);
  s.system = system;
  s.thinking = spec.scenario == Scenario::kChatThink;
  const std::vector<int> budget = TurnBudgets(spec, spec.system_tokens);
  for (int t = 0; t < spec.n_turns; ++t) {
    Rng rng(MixSeed(spec.seed, static_cast<uint64_t>(spec.rep) + 1, static_cast<uint64_t>(session), static_cast<uint64_t>(t)));
    TurnPlan turn;
    turn.turn = t;
    const int n = budget[static_cast<size_t>(t)];
    if (spec.scenario == Scenario::kGrow) {
      const bool python = rng.Chance(0.5);
      turn.added.push_back(UserMessage("Here is " + SourcePath(rng) + ":\n\n```\n" + Code(rng, n - 40, python) +
                                       "```\n\n" + UserRequest(rng, 30)));
    } else {
      turn.added.push_back(UserMessage(UserRequest(rng, n)));
    }
    if (spec.scenario == Scenario::kVolatile) turn.system = VolatileLine(spec.seed + static_cast<uint64_t>(spec.rep), session, t) + system;
    if (spec.scenario == Scenario::kInterrupt) turn.interrupt = spec.interrupt_every > 0 && (t + 1) % spec.interrupt_every == 0;
    s.turns.push_back(std::move(turn));
  }
  if (spec.scenario == Scenario::kVolatile) s.system = *s.turns[0].system;
  return s;
}

}  // namespace

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

const char* ScenarioName(Scenario s) {
  switch (s) {
    case Scenario::kChat: return "chat";
    case Scenario::kChatThink: return "chat-think";
    case Scenario::kAgent: return "agent";
    case Scenario::kInterrupt: return "interrupt";
    case Scenario::kVolatile: return "volatile";
    case Scenario::kInterleaved: return "interleaved";
    case Scenario::kGrow: return "grow";
    case Scenario::kPressure: return "pressure";
  }
  return "?";
}

StatusOr<Scenario> ParseScenario(const std::string& name) {
  for (Scenario s : kAll) {
    if (name == ScenarioName(s)) return s;
  }
  if (name == ScenarioName(Scenario::kPressure)) return Scenario::kPressure;
  return InvalidArgument("unknown scenario '" + name +
                         "' (chat, chat-think, agent, interrupt, volatile, interleaved, grow, pressure, all)");
}

std::vector<Scenario> AllScenarios() { return {std::begin(kAll), std::end(kAll)}; }

Workload MakeWorkload(const WorkloadSpec& spec_in) {
  WorkloadSpec spec = spec_in;
  spec.n_turns = std::max(1, spec.n_turns);
  spec.n_sessions = std::max(1, spec.n_sessions);
  const bool several = spec.scenario == Scenario::kInterleaved || spec.scenario == Scenario::kPressure;
  if (several && spec.n_sessions == 1) spec.n_sessions = 8;
  if (spec.scenario == Scenario::kPressure && spec.context_tokens > 0) {
    // The length goes to the system prompt; user messages and replies keep their sizes.
    spec.system_tokens = std::max(64, spec.context_tokens - spec.n_turns * (spec.user_tokens + spec.max_tokens));
    spec.context_tokens = 0;
  }

  Workload w;
  w.name = ScenarioName(spec.scenario);
  w.spec = spec;
  // The system prompt (and the agent's tools) are the same for every session and
  // repetition, as they are for one client talking to a server all day.
  Rng sys_rng(MixSeed(spec.seed, 0x737973, static_cast<uint64_t>(spec.scenario)));
  const std::string system = spec.scenario == Scenario::kAgent ? AgentSystemPrompt(sys_rng, spec.system_tokens)
                                                               : ChatSystem(sys_rng, spec.system_tokens);
  for (int s = 0; s < spec.n_sessions; ++s) {
    if (spec.scenario == Scenario::kAgent) {
      const int fixed = spec.system_tokens + 1500;  // the tool definitions are about this long
      w.sessions.push_back(AgentSession(spec, s, system, TurnBudgets(spec, fixed)));
    } else if (spec.scenario == Scenario::kPressure) {
      // Its own system prompt, so nothing but the template's first tokens is shared and
      // each conversation needs its own cells.
      Rng own(MixSeed(spec.seed, 0x707273, static_cast<uint64_t>(spec.rep), static_cast<uint64_t>(s)));
      w.sessions.push_back(ChatSession(spec, s, "Conversation " + HexId(own, 16) + ". " + ChatSystem(own, spec.system_tokens)));
    } else {
      w.sessions.push_back(ChatSession(spec, s, system));
    }
    if (!spec.nonce.empty()) {
      Json& first = w.sessions.back().turns[0].added[0];
      first["content"] = "(run " + spec.nonce + ")\n\n" + first["content"].get<std::string>();
    }
  }
  if (several) {
    for (int t = 0; t < spec.n_turns; ++t) {
      for (int s = 0; s < spec.n_sessions; ++s) w.order.emplace_back(s, t);
    }
  } else {
    for (int s = 0; s < spec.n_sessions; ++s) {
      for (int t = 0; t < spec.n_turns; ++t) w.order.emplace_back(s, t);
    }
  }
  return w;
}

SweepPrompt MakeSweepPrompt(int n_tokens, uint64_t seed) {
  Rng rng(MixSeed(seed, 0x737765, static_cast<uint64_t>(n_tokens)));
  SweepPrompt p;
  p.target_tokens = n_tokens;
  // The nonce comes first, so not even a system prompt prefix can be shared.
  std::string system = "Nonce " + HexId(rng, 32) + ". You are a summarizer.\n\n" + Prose(rng, std::max(8, n_tokens - 40));
  p.messages.push_back(Json{{"role", "system"}, {"content", std::move(system)}});
  p.messages.push_back(UserMessage("Summarize the text above in one sentence."));
  return p;
}

}  // namespace hearth::bench
