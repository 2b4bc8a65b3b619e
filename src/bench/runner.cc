#include "bench/runner.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "bench/local_render.h"
#include "bench/text.h"

namespace hearth::bench {

struct Runner::Conversation {
  std::vector<Json> messages;       // the last request's messages
  std::optional<Json> reply_to_send;  // the last reply, as the next request carries it
  bool reply_scripted = false;        // the client wrote that reply, not the server
  std::chrono::steady_clock::time_point replied_at;  // when the last reply ended
};

struct Runner::Server {
  Target target;
  ServerClient client;
  std::string model;
  Json info = Json::object();
  std::map<int, Conversation> conversations;
};

namespace {

// How many of `next`'s messages continue `prev`: all of prev when the roles match, else 0
// (a new conversation). The recorded reply that follows is not carried over: it is what
// the original server said, not what this one generated, so it is new here.
int CarriedCount(const std::vector<Json>& prev, const std::vector<Json>& next) {
  if (prev.empty() || next.size() <= prev.size()) return 0;
  for (size_t i = 0; i < prev.size(); ++i) {
    if (prev[i].value("role", "") != next[i].value("role", "")) return 0;
  }
  return static_cast<int>(prev.size());
}

Json ShortProps(Json props) {
  if (props.is_object() && props.contains("chat_template") && props["chat_template"].is_string()) {
    props["chat_template"] = "(" + std::to_string(props["chat_template"].get<std::string>().size()) + " bytes)";
  }
  return props;
}

// "hearth", "llamacpp", ...: whoever /v1/models says owns the model, else host:port.
std::string DefaultLabel(const Json& models, const Endpoint& ep) {
  const Json data = models.value("data", Json::array());
  if (data.is_array() && !data.empty() && data[0].is_object()) {
    const std::string owner = data[0].value("owned_by", "");
    if (!owner.empty()) return owner;
  }
  return ep.host + ":" + std::to_string(ep.port);
}

}  // namespace

std::chrono::milliseconds FollowUpPause(const TurnPlan& turn, const RunOptions& options) {
  return turn.tool_results ? options.think : std::max(options.think, options.user_think);
}

std::chrono::milliseconds ThinkWait(std::chrono::steady_clock::time_point replied_at,
                                    std::chrono::steady_clock::time_point now, std::chrono::milliseconds think) {
  const auto passed = std::chrono::duration_cast<std::chrono::milliseconds>(now - replied_at);
  return passed >= think ? std::chrono::milliseconds(0) : think - passed;
}

StatusOr<std::vector<ReplayLine>> ReadReplayFile(const std::string& path, std::optional<Flavor> flavor) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read replay file " + path);
  std::vector<ReplayLine> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded()) return InvalidArgument(path + ":" + std::to_string(n) + ": not JSON");
    ReplayLine rl;
    if (j.is_object() && j.contains("body") && j["body"].is_object()) {
      rl.session = j.value("session", Json("")).is_string() ? j.value("session", "") : j["session"].dump();
      j = j["body"];
    }
    auto req = ReadRecordedRequest(j, flavor);
    if (!req.ok()) return InvalidArgument(path + ":" + std::to_string(n) + ": " + req.status().message());
    rl.request = std::move(*req);
    out.push_back(std::move(rl));
  }
  if (out.empty()) return InvalidArgument(path + " holds no requests");
  return out;
}

Runner::Runner(std::vector<Target> targets, RenderSource render, RunOptions options)
    : targets_(std::move(targets)), render_(std::move(render)), options_(std::move(options)) {}

Runner::~Runner() = default;

void Runner::Note(std::string note) {
  std::fprintf(stderr, "hearth bench: %s\n", note.c_str());
  notes_.push_back(std::move(note));
}

Status Runner::Start() {
  for (const Target& t : targets_) {
    auto ep = ParseEndpoint(t.url);
    if (!ep.ok()) return ep.status();
    auto s = std::make_unique<Server>(Server{t, ServerClient(*ep, options_.api_key, options_.timeout_s)});
    auto models = s->client.GetJson("/v1/models");
    if (!models.ok() && models.status().code() == StatusCode::kUnavailable) {
      return Unavailable(t.label + " (" + t.url + ") does not answer: " + models.status().message());
    }
    s->model = options_.model;
    if (models.ok()) {
      s->info["models"] = *models;
      const Json& data = models->value("data", Json::array());
      if (s->model.empty() && data.is_array() && !data.empty()) s->model = data[0].value("id", "");
    }
    if (auto props = s->client.GetJson("/props"); props.ok()) s->info["props"] = ShortProps(*props);
    if (s->target.label.empty()) s->target.label = DefaultLabel(s->info.value("models", Json::object()), *ep);
    servers_.push_back(std::move(s));
  }
  // Two servers of the same kind get their ports in their labels.
  std::map<std::string, int> uses;
  for (auto& s : servers_) ++uses[s->target.label];
  for (auto& s : servers_) {
    if (uses[s->target.label] > 1) s->target.label += "@" + std::to_string(s->client.endpoint().port);
  }
  for (size_t i = 0; i < servers_.size(); ++i) targets_[i].label = servers_[i]->target.label;

  if (Status s = StartRenderer(); !s.ok()) {
    render_failed_ = true;
    Note("new tokens are unknown: " + s.message());
  } else if (!counter_->honours_add_generation_prompt()) {
    Note("the renderer (" + RenderName() + ") ignores add_generation_prompt=false, so carried-over messages are "
         "counted with a generation prompt and 'new' comes out a few tokens low; pass --render-model MODEL.gguf");
  } else if (counter_->continues_final_assistant()) {
    Note("the renderer (" + RenderName() + ") continues a final assistant message instead of closing it: its "
         "closing tokens count as new, and turns after a tool call cannot be counted; pass --render-model MODEL.gguf");
  }

  for (auto& s : servers_) {
    for (int i = 0; i < options_.warmup; ++i) {
      ChatRequest r;
      r.messages = {Json{{"role", "user"}, {"content", "Say hello."}}};
      r.max_tokens = 4;
      r.thinking = false;
      r.temperature = options_.temperature;
      const Json body = options_.flavor == Flavor::kOpenAI ? OpenAIBody(r, s->model) : AnthropicBody(r, s->model);
      ChatOutcome o = s->client.Chat(options_.flavor, body, std::nullopt);
      if (!o.ok) Note("warm-up request to " + s->target.label + " failed: " + o.error);
    }
  }
  return Status::Ok();
}

std::string Runner::RenderName() const {
  return render_.model_path.empty() ? render_.url + " /apply-template" : render_.model_path;
}

Status Runner::StartRenderer() {
  if (!render_.model_path.empty()) {
    auto local = LocalRenderBackend::Open(render_.model_path);
    if (!local.ok()) return Status(local.status().code(), "cannot load " + render_.model_path + ": " + local.status().message());
    render_backend_ = std::move(*local);
  } else {
    if (render_.url.empty()) render_.url = targets_.front().url;
    auto ep = ParseEndpoint(render_.url);
    if (!ep.ok()) return ep.status();
    render_client_ = std::make_unique<ServerClient>(*ep, options_.api_key, options_.timeout_s);
    render_backend_ = std::make_unique<HttpRenderBackend>(render_client_.get());
  }
  counter_ = std::make_unique<NewTokenCounter>(render_backend_.get());
  if (Status s = counter_->Probe(); !s.ok()) {
    return Status(s.code(), RenderName() + " cannot render prompts (" + s.message() +
                                "); pass --render-model MODEL.gguf, or --render-url a server with /apply-template and /tokenize");
  }
  return Status::Ok();
}

std::vector<Runner::Server*> Runner::ServerOrder(int rep) {
  std::vector<Server*> out;
  const size_t n = servers_.size();
  for (size_t i = 0; i < n; ++i) out.push_back(servers_[(i + static_cast<size_t>(rep)) % n].get());
  return out;
}

void Runner::Run(const Workload& w) {
  for (auto& s : servers_) s->conversations.clear();
  if (options_.alternate == Alternate::kSession) {
    for (Server* s : ServerOrder(w.spec.rep)) {
      for (auto [session, turn] : w.order) RunStep(*s, w, session, turn);
    }
  } else {
    for (auto [session, turn] : w.order) {
      for (Server* s : ServerOrder(w.spec.rep + turn)) RunStep(*s, w, session, turn);
    }
  }
}

void Runner::RunStep(Server& server, const Workload& w, int session, int turn) {
  if (before_turn_) before_turn_(session, turn);
  const SessionPlan& sp = w.sessions[static_cast<size_t>(session)];
  const TurnPlan& tp = sp.turns[static_cast<size_t>(turn)];
  Conversation& c = server.conversations[session];
  int n_carried = 0;
  if (turn == 0) {
    c.messages = {Json{{"role", "system"}, {"content", sp.system}}};
  } else {
    // A reply the server generated is carried over; one the client scripted in its place
    // (agent tool calls) is new to the server, so it counts as new.
    if (c.reply_scripted) n_carried = static_cast<int>(c.messages.size());
    c.messages.push_back(c.reply_to_send.value_or(Json{{"role", "assistant"}, {"content", ""}}));
    if (!c.reply_scripted) n_carried = static_cast<int>(c.messages.size());
    // After the hook: a restart it made counts towards the pause, as it would for a user.
    std::this_thread::sleep_for(ThinkWait(c.replied_at, std::chrono::steady_clock::now(), FollowUpPause(tp, options_)));
  }
  if (tp.system) c.messages[0]["content"] = *tp.system;
  for (const Json& m : tp.added) c.messages.push_back(m);

  ChatRequest req;
  req.messages = c.messages;
  req.tools = sp.tools;
  req.thinking = sp.thinking;
  req.max_tokens = w.spec.max_tokens;
  req.temperature = options_.temperature;
  if (options_.send_session_key) req.session_key = w.spec.nonce.empty() ? sp.id : sp.id + "-" + w.spec.nonce;
  const std::optional<int> cut = tp.interrupt ? std::optional<int>(w.spec.interrupt_after) : std::nullopt;
  ChatOutcome out;
  TurnRow row = Send(server, req, n_carried, cut, w.name, tp.tool_results ? "tool" : "user", &out);
  c.replied_at = std::chrono::steady_clock::now();
  row.rep = w.spec.rep;
  row.session = session;
  row.session_id = sp.id;
  row.turn = turn;
  c.reply_scripted = tp.scripted_reply.has_value();
  if (tp.scripted_reply) {
    c.reply_to_send = *tp.scripted_reply;
  } else {
    Json reply = {{"role", "assistant"}, {"content", out.content}};
    if (options_.send_reasoning && !out.reasoning.empty()) reply["reasoning_content"] = out.reasoning;
    c.reply_to_send = std::move(reply);
  }
  Progress(row, static_cast<int>(sp.turns.size()));
  rows_.push_back(std::move(row));
}

TurnRow Runner::Send(Server& server, const ChatRequest& request, int n_carried, std::optional<int> cut_after,
                     std::string scenario, std::string kind, ChatOutcome* outcome) {
  const Json body = options_.flavor == Flavor::kOpenAI ? OpenAIBody(request, server.model)
                                                       : AnthropicBody(request, server.model);
  TurnRow row = SendBody(server, options_.flavor, body, request, n_carried, cut_after, outcome);
  row.scenario = std::move(scenario);
  row.kind = std::move(kind);
  return row;
}

TurnRow Runner::SendBody(Server& server, Flavor flavor, const Json& body, const ChatRequest& canonical,
                         int n_carried, std::optional<int> cut_after, ChatOutcome* outcome) {
  TurnRow row;
  row.server = server.target.label;
  if (counter_ && !render_failed_) {
    // Rendering does not touch any server's cache, so it can come first.
    auto tt = counter_->Count(canonical.messages, canonical.tools, canonical.thinking, n_carried);
    if (tt.ok()) {
      row.rendered_prompt_tokens = tt->n_prompt;
      row.new_tokens = tt->n_new;
      row.prompt_text = std::move(tt->prompt_text);
    } else {
      Note("cannot count new tokens for this request: " + tt.status().message());
    }
  }
  *outcome = server.client.Chat(flavor, body, cut_after);
  const ChatOutcome& o = *outcome;
  row.ok = o.ok;
  row.error = o.error;
  row.interrupted = o.interrupted;
  row.prompt_tokens = o.usage.prompt_tokens ? o.usage.prompt_tokens : row.rendered_prompt_tokens;
  row.reused_tokens = o.usage.reused_tokens;
  row.completion_tokens = o.usage.completion_tokens;
  row.ttft_ms = o.ttft_ms;
  row.e2e_ms = o.e2e_ms;
  row.decode_tps = o.decode_tps;
  row.server_prefill_ms = o.usage.prefill_ms;
  row.usage_source = o.interrupted ? "cut" : o.usage.source;
  row.reuse_tier = o.usage.cache_tier;
  row.reuse_stopped = o.usage.stopped_because;
  return row;
}

void Runner::Replay(const std::vector<ReplayLine>& lines, std::optional<int> max_tokens) {
  std::map<std::string, int> session_index;
  for (const ReplayLine& l : lines) session_index.emplace(l.session, static_cast<int>(session_index.size()));
  auto run_line = [&](Server& s, const ReplayLine& l, std::map<std::string, std::vector<Json>>& prev,
                      std::map<std::string, int>& turns) {
    const ChatRequest& canonical = l.request.canonical;
    const int n_carried = CarriedCount(prev[l.session], canonical.messages);
    if (n_carried == 0) turns[l.session] = 0;
    prev[l.session] = canonical.messages;
    Json body = l.request.body;
    body["stream"] = true;
    if (l.request.flavor == Flavor::kOpenAI) body["stream_options"] = {{"include_usage", true}};
    body["model"] = s.model.empty() ? body.value("model", Json("default")) : Json(s.model);
    if (max_tokens) body["max_tokens"] = std::min(*max_tokens, body.value("max_tokens", *max_tokens));
    ChatOutcome out;
    TurnRow row = SendBody(s, l.request.flavor, body, canonical, n_carried, std::nullopt, &out);
    row.scenario = "replay";
    row.kind = "replay";
    row.session = session_index[l.session];
    row.session_id = l.session.empty() ? "replay" : l.session;
    row.turn = turns[l.session]++;
    Progress(row, 0);
    rows_.push_back(std::move(row));
  };
  std::vector<std::map<std::string, std::vector<Json>>> prev(servers_.size());
  std::vector<std::map<std::string, int>> turns(servers_.size());
  if (options_.alternate == Alternate::kSession) {
    for (size_t i = 0; i < servers_.size(); ++i) {
      for (const ReplayLine& l : lines) run_line(*servers_[i], l, prev[i], turns[i]);
    }
  } else {
    for (const ReplayLine& l : lines) {
      for (size_t i = 0; i < servers_.size(); ++i) run_line(*servers_[i], l, prev[i], turns[i]);
    }
  }
}

namespace {

// A cold prompt (sweep, depth probe) as a request: thinking off, a few tokens of reply.
ChatRequest ColdRequest(const SweepPrompt& p, int max_tokens, std::optional<double> temperature) {
  ChatRequest req;
  req.messages = p.messages;
  req.thinking = false;
  req.max_tokens = max_tokens;
  req.temperature = temperature;
  return req;
}

}  // namespace

void Runner::Sweep(const std::vector<int>& sizes, uint64_t seed, int rep, bool warm) {
  const std::vector<std::string> kinds = warm ? std::vector<std::string>{"cold", "warm"} : std::vector<std::string>{"cold"};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const ChatRequest req =
        ColdRequest(MakeSweepPrompt(sizes[i], MixSeed(seed, static_cast<uint64_t>(rep))), 4, options_.temperature);
    for (Server* s : ServerOrder(rep + static_cast<int>(i))) {
      for (const std::string& kind : kinds) {
        ChatOutcome out;
        TurnRow row = Send(*s, req, 0, std::nullopt, "sweep", kind, &out);
        if (row.kind == "warm" && row.new_tokens) row.new_tokens = 0;  // nothing is new the second time
        row.rep = rep;
        row.session = static_cast<int>(i);
        row.session_id = "sweep-" + std::to_string(sizes[i]);
        Progress(row, 0);
        rows_.push_back(std::move(row));
      }
    }
  }
}

void Runner::DepthProbe(int n_tokens, uint64_t seed) {
  const ChatRequest req = ColdRequest(MakeSweepPrompt(n_tokens, MixSeed(seed, 0x70726f6265)), 2, options_.temperature);
  for (auto& s : servers_) {
    ChatOutcome out;
    TurnRow row = Send(*s, req, 0, std::nullopt, kDepthProbeScenario, "cold", &out);
    row.session_id = kDepthProbeScenario;
    if (!row.ok) Note("the depth probe to " + s->target.label + " failed: " + row.error);
    Progress(row, 0);
    rows_.push_back(std::move(row));
  }
}

void Runner::Progress(const TurnRow& r, int n_turns) const {
  if (!options_.progress) return;
  auto num = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("?"); };
  std::string line = "[" + r.server + "] " + r.scenario + " r" + std::to_string(r.rep) + " s" + std::to_string(r.session) +
                     " t" + std::to_string(r.turn + 1) + (n_turns > 0 ? "/" + std::to_string(n_turns) : "") + " " + r.kind +
                     ": prompt " + num(r.prompt_tokens) + " reused " + num(r.reused_tokens) + " prefilled " +
                     num(r.prefilled_tokens()) + " new " + num(r.new_tokens);
  if (auto ratio = r.prefill_ratio()) line += " (" + FormatNumber(*ratio) + "x)";
  if (r.ttft_ms) line += " ttft " + FormatNumber(*r.ttft_ms) + " ms";
  line += " e2e " + FormatNumber(r.e2e_ms) + " ms";
  if (r.interrupted) line += " [cut]";
  if (!r.ok) line += " ERROR " + r.error.substr(0, 120);
  std::fprintf(stderr, "%s\n", line.c_str());
}

Json Runner::Environment() const {
  Json env;
  Json servers = Json::array();
  for (const auto& s : servers_) {
    servers.push_back({{"label", s->target.label}, {"url", s->target.url}, {"model", s->model}, {"info", s->info}});
  }
  env["servers"] = std::move(servers);
  env["renderer"] = {{"source", RenderName()},
                     {"available", counter_ && !render_failed_},
                     {"honours_add_generation_prompt", counter_ && counter_->honours_add_generation_prompt()},
                     {"continues_final_assistant", counter_ && counter_->continues_final_assistant()}};
  env["options"] = {{"flavor", options_.flavor == Flavor::kOpenAI ? "openai" : "anthropic"},
                    {"send_reasoning", options_.send_reasoning},
                    {"temperature", options_.temperature ? Json(*options_.temperature) : Json(nullptr)},
                    {"warmup", options_.warmup},
                    {"think_ms", options_.think.count()},
                    {"user_think_ms", options_.user_think.count()},
                    {"send_session_key", options_.send_session_key},
                    {"alternate", options_.alternate == Alternate::kSession ? "session" : "turn"}};
  env["notes"] = notes_;
  return env;
}

}  // namespace hearth::bench
