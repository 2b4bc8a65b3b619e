#include "bench/agent_script.h"

#include <algorithm>

namespace hearth::bench {
namespace {

// A coding agent's tools, written for this benchmark in the style such agents use: long
// descriptions, JSON schemas with required fields and enums.
constexpr const char* kToolsJson = R"JSON([
{"type":"function","function":{"name":"read_file","description":"Reads a file from the local filesystem and returns its contents with line numbers, starting at line 1. The path must be absolute or relative to the repository root. By default up to 2000 lines are returned; use offset and limit to page through longer files. Lines longer than 2000 characters are truncated. Reading a directory is an error: use list_directory or glob for that. When you are going to edit a file, read it first so that your edit matches its current contents exactly.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"The path of the file to read"},"offset":{"type":"integer","description":"The line number to start reading from (1-based). Only give this for files too long to read at once"},"limit":{"type":"integer","description":"How many lines to read. Only give this for files too long to read at once"}},"required":["file_path"],"additionalProperties":false}}},
{"type":"function","function":{"name":"edit_file","description":"Replaces text in a file. old_string must occur in the file exactly once, including its indentation and line breaks, unless replace_all is true; otherwise the edit fails and nothing is changed. Keep old_string as short as possible while still unique. Never include the line-number prefix that read_file adds. Prefer editing existing files to writing new ones.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"The path of the file to modify"},"old_string":{"type":"string","description":"The exact text to replace"},"new_string":{"type":"string","description":"The text to replace it with (must differ from old_string)"},"replace_all":{"type":"boolean","default":false,"description":"Replace every occurrence of old_string"}},"required":["file_path","old_string","new_string"],"additionalProperties":false}}},
{"type":"function","function":{"name":"write_file","description":"Writes a file, replacing it if it exists. Read an existing file before overwriting it. Do not create documentation files unless the user asks for them.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"The path of the file to write"},"content":{"type":"string","description":"The full contents of the file"}},"required":["file_path","content"],"additionalProperties":false}}},
{"type":"function","function":{"name":"bash","description":"Runs a shell command in a persistent bash session with an optional timeout, and returns its standard output and standard error. Use it for builds, tests, git and package managers; do not use it to read, search or edit files, which have their own tools. Quote paths that contain spaces. Commands that run longer than the timeout are killed. Output longer than 30000 characters is truncated.","parameters":{"type":"object","properties":{"command":{"type":"string","description":"The command to run"},"timeout":{"type":"integer","description":"Timeout in milliseconds (at most 600000)"},"description":{"type":"string","description":"What the command does, in five to ten words"},"run_in_background":{"type":"boolean","description":"Run the command in the background and return at once"}},"required":["command"],"additionalProperties":false}}},
{"type":"function","function":{"name":"grep","description":"Searches file contents with a regular expression (ripgrep syntax) and returns matching files or lines. Use glob or type to restrict which files are searched. Prefer this tool to running grep or rg through bash.","parameters":{"type":"object","properties":{"pattern":{"type":"string","description":"The regular expression to search for"},"path":{"type":"string","description":"File or directory to search in (default: the repository root)"},"glob":{"type":"string","description":"Only search files matching this glob, e.g. \"*.cc\""},"output_mode":{"type":"string","enum":["content","files_with_matches","count"],"description":"content shows matching lines, files_with_matches only file paths (the default), count the number of matches per file"},"case_insensitive":{"type":"boolean","description":"Ignore case"},"context_lines":{"type":"integer","description":"Lines of context to show around each match (content mode only)"}},"required":["pattern"],"additionalProperties":false}}},
{"type":"function","function":{"name":"glob","description":"Finds files whose paths match a glob pattern such as \"src/**/*.h\", sorted by modification time, newest first. Use it to find files by name; use grep to find files by content.","parameters":{"type":"object","properties":{"pattern":{"type":"string","description":"The glob pattern"},"path":{"type":"string","description":"Directory to search in (default: the repository root)"}},"required":["pattern"],"additionalProperties":false}}},
{"type":"function","function":{"name":"todo_write","description":"Creates or updates the structured task list for this session. Use it for work with three or more steps, mark a task in_progress before starting it and completed as soon as it is done; only one task may be in progress at a time.","parameters":{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]},"id":{"type":"string"}},"required":["content","status","id"]}}},"required":["todos"],"additionalProperties":false}}}
])JSON";

Json ToolCall(Rng& rng, const std::string& name, const Json& args) {
  return Json{{"id", "call_" + HexId(rng, 24)},
              {"type", "function"},
              {"function", {{"name", name}, {"arguments", args.dump()}}}};
}

Json ToolResult(const Json& call, std::string content) {
  return Json{{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", std::move(content)}};
}

std::string NumberLines(const std::string& text) {
  std::string out;
  int line = 1;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string num = std::to_string(line++);
    out += std::string(num.size() < 6 ? 6 - num.size() : 0, ' ') + num + "\t" + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// One step of the agent: the assistant's scripted tool call(s) and the results the next
// request carries, about `n_tokens` long in all.
struct Step {
  Json reply;
  std::vector<Json> results;
};

// The assistant's text before its tool call: `text` half the time, else none.
Json Preamble(Rng& rng, const std::string& text) {
  return Json{{"role", "assistant"}, {"content", rng.Chance(0.5) ? text : std::string()}};
}

// Each step kind adds its call(s) to `calls` and their results to `st`. The order of the
// draws from `rng` is the workload: changing it changes every session after this step.
void ReadFilesStep(Rng& rng, bool python, int n_tokens, Step& st, Json& calls) {
  const int n_files = rng.Chance(0.3) ? 2 : 1;
  st.reply = Preamble(rng, "Let me look at the relevant code first.");
  for (int i = 0; i < n_files; ++i) {
    Json call = ToolCall(rng, "read_file", Json{{"file_path", SourcePath(rng)}});
    st.results.push_back(ToolResult(call, NumberLines(Code(rng, n_tokens / n_files, python))));
    calls.push_back(std::move(call));
  }
}

void SearchStep(Rng& rng, bool python, int n_tokens, Step& st, Json& calls) {
  st.reply = Preamble(rng, "I'll search for the other places that use it.");
  const std::string pattern = Identifier(rng, rng.Chance(0.5));
  Json call = ToolCall(rng, "grep", Json{{"pattern", pattern}, {"glob", python ? "*.py" : "*.cc"}, {"output_mode", "content"}});
  std::string out;
  while (EstimateTokens(out) < n_tokens) {
    out += SourcePath(rng) + ":" + std::to_string(rng.Range(1, 900)) + ":  " + Identifier(rng, false) + " = " + pattern +
           "(" + Identifier(rng, false) + ");\n";
  }
  st.results.push_back(ToolResult(call, out));
  calls.push_back(std::move(call));
}

void EditStep(Rng& rng, bool python, int n_tokens, Step& st, Json& calls) {
  st.reply = Preamble(rng, "Now I'll make the change.");
  const std::string path = SourcePath(rng);
  Json call = ToolCall(rng, "edit_file",
                       Json{{"file_path", path},
                            {"old_string", Code(rng, 40, python)},
                            {"new_string", Code(rng, 50, python)}});
  st.results.push_back(ToolResult(call, "The file " + path + " has been updated. Here is the edited part:\n" +
                                            NumberLines(Code(rng, std::max(20, n_tokens - 20), python))));
  calls.push_back(std::move(call));
}

void RunTestsStep(Rng& rng, int n_tokens, Step& st, Json& calls) {
  st.reply = Preamble(rng, "Let me run the tests to check.");
  Json call = ToolCall(rng, "bash", Json{{"command", "make test 2>&1 | tail -40"}, {"description", "Run the test suite"}});
  std::string out;
  int i = 0;
  while (EstimateTokens(out) < n_tokens) {
    out += "[ RUN      ] " + Identifier(rng, true) + "Test." + Identifier(rng, true) + "\n[       OK ] (" +
           std::to_string(rng.Range(0, 90)) + " ms)\n";
    if (++i % 7 == 0) out += Prose(rng, 20) + "\n";
  }
  out += "100% tests passed, 0 tests failed out of " + std::to_string(i) + "\n";
  st.results.push_back(ToolResult(call, out));
  calls.push_back(std::move(call));
}

// Step 0 of a cycle reads one or two files, step 1 searches, later ones edit a file or
// run the tests.
Step MakeStep(Rng& rng, int cycle_step, int n_tokens) {
  Step st;
  Json calls = Json::array();
  const bool python = rng.Chance(0.4);
  if (cycle_step == 0) {
    ReadFilesStep(rng, python, n_tokens, st, calls);
  } else if (cycle_step == 1) {
    SearchStep(rng, python, n_tokens, st, calls);
  } else if (rng.Chance(0.5)) {
    EditStep(rng, python, n_tokens, st, calls);
  } else {
    RunTestsStep(rng, n_tokens, st, calls);
  }
  st.reply["tool_calls"] = std::move(calls);
  return st;
}

}  // namespace

Json AgentTools() { return Json::parse(kToolsJson); }

std::string AgentSystemPrompt(Rng& rng, int n_tokens) {
  std::string s =
      "You are a coding agent working in the user's repository. Use the tools to read, search and edit files "
      "and to run commands. Read a file before editing it. Keep your answers short and say what you changed.\n\n"
      "# Environment\nWorking directory: /home/dev/project\nPlatform: linux\n\n# Notes\n";
  return s + Prose(rng, std::max(16, n_tokens - EstimateTokens(s)));
}

SessionPlan AgentSession(const WorkloadSpec& spec, int session, const std::string& system,
                         const std::vector<int>& budget) {
  SessionPlan s;
  s.id = std::string(ScenarioName(spec.scenario)) + "-r" + std::to_string(spec.rep) + "-s" + std::to_string(session);
  s.system = system;
  s.tools = AgentTools();
  constexpr int kCycle = 4;  // user request, then three tool steps
  s.turns.resize(static_cast<size_t>(spec.n_turns));
  for (int t = 0; t < spec.n_turns; ++t) s.turns[static_cast<size_t>(t)].turn = t;
  // Fill turns: at a cycle start the user speaks; each reply before a tool step is
  // replaced by the step's call, and the step's results are the next turn's messages.
  for (int t = 0; t < spec.n_turns; ++t) {
    Rng rng(MixSeed(spec.seed, static_cast<uint64_t>(spec.rep) + 1, static_cast<uint64_t>(session),
                    static_cast<uint64_t>(t) + 0x1000));
    const int step = t % kCycle;
    TurnPlan& turn = s.turns[static_cast<size_t>(t)];
    if (step == 0) {
      turn.added.push_back(Json{{"role", "user"}, {"content", UserRequest(rng, budget[static_cast<size_t>(t)])}});
    }
    if (step < kCycle - 1 && t + 1 < spec.n_turns) {
      Step st = MakeStep(rng, step, budget[static_cast<size_t>(t) + 1]);
      turn.scripted_reply = std::move(st.reply);
      TurnPlan& next = s.turns[static_cast<size_t>(t) + 1];
      next.added = std::move(st.results);
      next.tool_results = true;
    }
  }
  return s;
}

}  // namespace hearth::bench
