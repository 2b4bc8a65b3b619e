// The scripted coding agent behind Scenario::kAgent (internal to src/bench/).
//
// A session cycles through: user request -> the agent reads a file -> searches -> edits
// (or runs the tests) -> answers in its own words -> next user request. Every reply that
// should be a tool call is replaced by a scripted assistant message with tool_calls, and
// the next request carries the tool results; the model's own reply is sent back only at
// the end of each cycle.
#pragma once

#include <string>
#include <vector>

#include "bench/text.h"
#include "bench/workload.h"

namespace hearth::bench {

std::string AgentSystemPrompt(Rng& rng, int n_tokens);

// `budget[t]`: tokens turn t adds (the user message or the tool results).
SessionPlan AgentSession(const WorkloadSpec& spec, int session, const std::string& system,
                         const std::vector<int>& budget);

}  // namespace hearth::bench
