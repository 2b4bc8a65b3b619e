#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/openai.h"
#include "api/responses.h"
#include "api/utility.h"
#include "server/cache_view.h"
#include "server/generate_handler.h"
#include "server/metrics.h"
#include "web/web_page.h"

namespace hearth::server {
namespace {

bool IsAnthropicPath(const std::string& path) { return path.starts_with("/v1/messages"); }

// The error body in the shape of the API the path belongs to.
std::string ErrorBodyFor(const std::string& path, const api::ApiError& e) {
  return IsAnthropicPath(path) ? api::anthropic::ErrorJson(e) : api::openai::ErrorJson(e);
}

void ReplyError(const httplib::Request& req, httplib::Response& res, const api::ApiError& e) {
  std::fprintf(stderr, "hearth: %s %s -> %d %s\n", req.method.c_str(), req.path.c_str(), e.http_status,
               e.message.c_str());
  res.status = e.http_status;
  res.set_content(ErrorBodyFor(req.path, e), "application/json");
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

// Handlers run inside this: any exception becomes a 500 in the API's shape.
httplib::Server::Handler Guarded(httplib::Server::Handler h) {
  return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const std::exception& e) {
      ReplyError(req, res, {500, "api_error", std::string("internal error: ") + e.what(), ""});
    } catch (...) {
      ReplyError(req, res, {500, "api_error", "internal error", ""});
    }
  };
}

// A JSON route refuses a body declared as something else: a form or plain text is not
// what the client meant to send (curl -d without -H sends a form). No Content-Type at all
// is read as JSON, as is application/json with parameters and any application/...+json.
std::optional<api::ApiError> RefuseNonJsonBody(const httplib::Request& req) {
  if (!req.has_header("Content-Type")) return std::nullopt;
  const std::string value = req.get_header_value("Content-Type");
  std::string type = value.substr(0, value.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.erase(0, 1);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (type == "application/json" || (type.starts_with("application/") && type.ends_with("+json"))) {
    return std::nullopt;
  }
  return api::ApiError{415, "invalid_request_error",
                       "Content-Type must be application/json (got \"" + value.substr(0, 100) + "\")", ""};
}

// httplib answers the codings it cannot decode (gzip, br, ... in this build) with 415
// itself but passes an unknown one through as if it were plain: refuse them all.
std::optional<api::ApiError> RefuseEncodedBody(const httplib::Request& req) {
  if (!req.has_header("Content-Encoding")) return std::nullopt;
  const std::string value = req.get_header_value("Content-Encoding");
  if (value == "identity") return std::nullopt;
  return api::ApiError{415, "invalid_request_error",
                       "Content-Encoding \"" + value.substr(0, 100) + "\" is not supported; send the body as is", ""};
}

// Request heads past these are refused before any handler runs: httplib bounds each
// header line (8 KiB) and their number (100) but not their sum, and this build of it
// lets longer request targets through.
constexpr size_t kMaxTargetBytes = 8192;
constexpr size_t kMaxHeaderBytes = 64 * 1024;

std::optional<api::ApiError> RefuseOversizedHead(const httplib::Request& req) {
  if (req.target.size() > kMaxTargetBytes) {
    return api::ApiError{414, "invalid_request_error",
                         "the request target is " + std::to_string(req.target.size()) + " bytes long, more than the " +
                             std::to_string(kMaxTargetBytes) + " the server accepts",
                         ""};
  }
  size_t n_bytes = 0;
  for (const auto& [name, value] : req.headers) n_bytes += name.size() + value.size() + 4;
  if (n_bytes > kMaxHeaderBytes) {
    return api::ApiError{431, "invalid_request_error",
                         "the request headers hold " + std::to_string(n_bytes) + " bytes, more than the " +
                             std::to_string(kMaxHeaderBytes) + " the server accepts",
                         ""};
  }
  return std::nullopt;
}

// A POST route that reads a JSON body: Guarded, after the Content-Type and
// Content-Encoding checks.
httplib::Server::Handler JsonRoute(httplib::Server::Handler h) {
  return Guarded([h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    if (auto e = RefuseNonJsonBody(req)) return ReplyError(req, res, *e);
    if (auto e = RefuseEncodedBody(req)) return ReplyError(req, res, *e);
    h(req, res);
  });
}

}  // namespace

HttpServer::HttpServer(HttpConfig config, const engine::Model& model, const engine::ChatTemplate& chat_template,
                       EngineLoop& engine)
    : config_(std::move(config)),
      model_(model),
      template_(chat_template),
      engine_(engine),
      builder_(model, chat_template, engine.config().SeqPositions(), engine.config().cache_namespace,
               config_.stabilizer, config_.chat_defaults),
      responses_(config_.max_stored_responses, config_.max_stored_response_bytes),
      http_(std::make_unique<httplib::Server>()) {
  if (config_.warm_ahead) warm_ahead_ = std::make_unique<WarmAhead>(builder_, engine_);
  engine_.SetFinishedCallback([this, w = warm_ahead_.get()](const GenerationTask& task, const api::Completion& c) {
    request_metrics_.Record(c);
    if (w != nullptr) w->OnFinished(task, c);
  });
  if (config_.warm_ahead) {
    engine_.SetProgressCallback([w = warm_ahead_.get()](const GenerationTask& task, const api::Completion& partial,
                                                        std::shared_ptr<ShadowMailbox> mailbox) {
      w->OnProgress(task, partial, std::move(mailbox));
    });
  }
  RegisterRoutes();
}

HttpServer::~HttpServer() { Stop(); }

// x-api-key, else Authorization: Bearer. Every key is compared, in constant time.
const ApiKey* HttpServer::FindKey(const httplib::Request& req) const {
  std::string key = req.get_header_value("x-api-key");
  const std::string auth = req.get_header_value("Authorization");
  if (key.empty() && auth.starts_with("Bearer ")) key = auth.substr(7);
  const ApiKey* found = nullptr;
  for (const ApiKey& k : config_.api_keys) {
    if (ConstantTimeEquals(key, k.key)) found = &k;
  }
  return found;
}

// With API keys, each key's requests live in its own cache namespace (a keyed hash of the
// key, see api_keys.h: never its text, nor its place among the keys).
void HttpServer::IsolateByKey(const httplib::Request& req, api::GenerationRequest& request) const {
  if (config_.api_keys.empty()) return;
  const ApiKey* key = FindKey(req);  // never null: the pre-routing handler refused those
  request.cache_salt = (key ? key->cache_namespace : std::string("no-key")) + "|" + request.cache_salt;
}

std::function<bool(const std::string&)> HttpServer::VisibleNamespaces(const httplib::Request& req) const {
  if (config_.api_keys.empty()) return [](const std::string&) { return true; };
  const ApiKey* key = FindKey(req);
  if (key == nullptr) return [](const std::string&) { return false; };
  // As IsolateByKey salts: the key's namespace, then '|' (the hex digits end there, so no
  // key's prefix is another's).
  const std::string prefix = builder_.CacheNamespace(key->cache_namespace + "|");
  return [prefix](const std::string& ns) { return ns.starts_with(prefix); };
}

std::string HttpServer::ResponsesNamespace(const httplib::Request& req) const {
  if (config_.api_keys.empty()) return "";
  const ApiKey* key = FindKey(req);
  return key ? key->cache_namespace : "no-key";
}

Status HttpServer::Bind() {
  if (config_.port == 0) {
    port_ = http_->bind_to_any_port(config_.host);
    if (port_ <= 0) return Unavailable("cannot bind " + config_.host);
  } else {
    if (!http_->bind_to_port(config_.host, config_.port)) {
      return Unavailable("cannot bind " + config_.host + ":" + std::to_string(config_.port) +
                         " (in use, or not an address of this machine)");
    }
    port_ = config_.port;
  }
  return Status::Ok();
}

void HttpServer::Serve() { http_->listen_after_bind(); }

void HttpServer::Stop() {
  if (http_) http_->stop();
}

namespace {

// httplib's pool, counting what it accepts and what its workers take up.
class CountingPool final : public httplib::TaskQueue {
 public:
  CountingPool(size_t min_threads, size_t max_threads, size_t max_pending, std::atomic<int64_t>& accepted,
               std::atomic<int64_t>& taken)
      : pool_(min_threads, max_threads, max_pending), accepted_(accepted), taken_(taken) {}
  bool enqueue(std::function<void()> fn) override {
    const bool ok = pool_.enqueue([this, fn = std::move(fn)] {
      taken_.fetch_add(1);
      fn();
    });
    if (ok) accepted_.fetch_add(1);
    return ok;
  }
  void shutdown() override { pool_.shutdown(); }
  void on_idle() override { pool_.on_idle(); }

 private:
  httplib::ThreadPool pool_;
  std::atomic<int64_t>& accepted_;
  std::atomic<int64_t>& taken_;
};

}  // namespace

void HttpServer::RegisterRoutes() {
  ConfigureConnections();
  InstallRequestGate();
  InstallErrorBodies();
  RegisterGenerationRoutes();
  RegisterResponsesRoutes();
  RegisterServerRoutes();
  RegisterPromptRoutes();
}

void HttpServer::ConfigureConnections() {
  httplib::Server& s = *http_;
  // A few threads always, more on demand up to the bound (they exit when idle); past the
  // bound, a bounded queue, then httplib closes new connections at once.
  const auto max_threads = static_cast<size_t>(std::max(1, config_.n_http_threads));
  const auto max_pending = static_cast<size_t>(std::max(1, config_.max_pending_connections));
  s.new_task_queue = [this, max_threads, max_pending] {
    return new CountingPool(std::min<size_t>(8, max_threads), max_threads, max_pending, n_accepted_, n_taken_);
  };
  s.set_payload_max_length(config_.max_body_bytes);
  s.set_read_timeout(config_.read_timeout_s, 0);
  s.set_keep_alive_timeout(std::min(5, config_.read_timeout_s));
  s.set_write_timeout(config_.write_timeout_s, 0);
}

void HttpServer::InstallRequestGate() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auto e = RefuseOversizedHead(req)) {
      ReplyError(req, res, *e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (config_.cors) {
      res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin").empty() ? "*" : req.get_header_value("Origin"));
      res.set_header("Access-Control-Allow-Headers", "*");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const bool open = req.path == "/health" || (req.path == "/" && req.method == "GET");
    if (config_.api_keys.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    if (FindKey(req) != nullptr) return httplib::Server::HandlerResponse::Unhandled;
    ReplyError(req, res, {401, "authentication_error", "invalid or missing API key", ""});
    return httplib::Server::HandlerResponse::Handled;
  });
}

// Errors httplib produces itself (unknown route, body too large) get a JSON body too.
void HttpServer::InstallErrorBodies() {
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 404   ? "no route for " + req.method + " " + req.path
                          : res.status == 413 ? "the request body is larger than the server accepts"
                                              : "request failed with HTTP " + std::to_string(res.status);
    const std::string type = res.status == 404 ? "not_found_error" : "invalid_request_error";
    res.set_content(ErrorBodyFor(req.path, {res.status, type, message, ""}), "application/json");
  });
}

void HttpServer::RegisterGenerationRoutes() {
  // The OpenAI and Anthropic generation routes differ only in how they read the body.
  auto generate = [this](api::ParseResult<api::GenerationRequest> (*parse)(std::string_view body)) {
    return JsonRoute([this, parse](const httplib::Request& req, httplib::Response& res) {
      const auto received = std::chrono::steady_clock::now();
      auto r = parse(req.body);
      if (!r.ok()) return ReplyError(req, res, r.error());
      IsolateByKey(req, *r);
      HandleGenerate(builder_, engine_, config_.model_alias, *r, req, res, received);
    });
  };
  http_->Post("/v1/chat/completions", generate(api::openai::ParseChatCompletionRequest));
  http_->Post("/v1/completions", generate(api::openai::ParseCompletionRequest));
  http_->Post("/v1/messages", generate(api::anthropic::ParseMessagesRequest));
}

void HttpServer::RegisterResponsesRoutes() {
  http_->Post("/v1/responses", JsonRoute([this](const httplib::Request& req, httplib::Response& res) {
    const auto received = std::chrono::steady_clock::now();
    auto r = api::responses::ParseResponsesRequest(req.body);
    if (!r.ok()) return ReplyError(req, res, r.error());
    HandleResponses(*r, req, res, received);
  }));
  http_->Get("/v1/responses/:id", Guarded([this](const httplib::Request& req, httplib::Response& res) {
    GetStoredResponse(req, res);
  }));
  http_->Delete("/v1/responses/:id", Guarded([this](const httplib::Request& req, httplib::Response& res) {
    DeleteStoredResponse(req, res);
  }));
}

void HttpServer::RegisterServerRoutes() {
  httplib::Server& s = *http_;
  s.Get("/v1/models", Guarded([this](const httplib::Request&, httplib::Response& res) {
    res.set_content(api::openai::ModelsJson({{config_.model_alias, 0, "hearth"}}), "application/json");
  }));
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json out = {{"status", "ok"}};
    // Still serving, but a person should know the disk tier asked for is not there.
    if (!engine_.disk_unavailable().empty()) out["disk_tier"] = {{"unavailable", engine_.disk_unavailable()}};
    res.set_content(out.dump(), "application/json");
  });
  s.Get("/metrics", Guarded([this](const httplib::Request&, httplib::Response& res) {
    res.set_content(FormatPrometheus(engine_.stats()) + FormatTemplateMetrics(builder_.n_spliced()) +
                        request_metrics_.FormatPrometheus(),
                    "text/plain; version=0.0.4");
  }));
  s.Get("/v1/cache", Guarded([this](const httplib::Request& req, httplib::Response& res) {
    const auto visible = VisibleNamespaces(req);
    const cache::CacheSummary summary = cache::VisibleTo(*engine_.CacheSnapshot(), visible);
    res.set_header("Cache-Control", "no-store");
    res.set_content(FormatCacheSummary(summary, engine_.RecentRequests(visible)), "application/json");
  }));
  // The web page (src/web/index.html): chat, and what the cache holds.
  s.Get("/", Guarded([](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy", web::kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::string(web::IndexHtml()), "text/html; charset=utf-8");
  }));
}

// Anthropic's count_tokens, then hearth's own routes: their bodies are parsed with the
// typed readers (api/utility.h), so a wrongly typed field is a 400 naming it.
void HttpServer::RegisterPromptRoutes() {
  httplib::Server& s = *http_;
  s.Post("/v1/messages/count_tokens", JsonRoute([this](const httplib::Request& req, httplib::Response& res) {
    auto r = api::anthropic::ParseCountTokensRequest(req.body);
    if (!r.ok()) return ReplyError(req, res, r.error());
    auto built = builder_.Render(*r);
    if (auto* err = std::get_if<api::ApiError>(&built)) return ReplyError(req, res, *err);
    const auto n = static_cast<int>(std::get<BuildResult>(built).task.prompt.size());
    res.set_content(api::anthropic::CountTokensJson(n), "application/json");
  }));
  s.Post("/tokenize", JsonRoute([this](const httplib::Request& req, httplib::Response& res) {
    auto r = api::utility::ParseTokenizeRequest(req.body);
    if (!r.ok()) return ReplyError(req, res, r.error());
    auto tokens = model_.Tokenize(r->content, r->add_special, r->parse_special);
    res.set_content(api::utility::TokenizeJson(tokens), "application/json");
  }));
  s.Post("/detokenize", JsonRoute([this](const httplib::Request& req, httplib::Response& res) {
    auto r = api::utility::ParseDetokenizeRequest(req.body, model_.info().n_vocab);
    if (!r.ok()) return ReplyError(req, res, r.error());
    res.set_content(api::utility::DetokenizeJson(model_.Detokenize(r->tokens, true)), "application/json");
  }));
  s.Post("/apply-template", JsonRoute([this](const httplib::Request& req, httplib::Response& res) {
    auto r = api::utility::ParseApplyTemplateRequest(req.body);
    if (!r.ok()) return ReplyError(req, res, r.error());
    auto built = builder_.Render(r->chat);
    if (auto* err = std::get_if<api::ApiError>(&built)) return ReplyError(req, res, *err);
    const BuildResult& br = std::get<BuildResult>(built);
    std::string prompt = br.prompt_text;
    size_t n_tokens = br.task.prompt.size();
    const std::string gen = br.task.output_format ? br.task.output_format->generation_prompt : "";
    if (!r->add_generation_prompt && !gen.empty() && prompt.ends_with(gen)) {
      prompt.resize(prompt.size() - gen.size());
      n_tokens = builder_.TokenizeRendered(prompt).size();
    }
    res.set_content(api::utility::ApplyTemplateJson(prompt, n_tokens), "application/json");
  }));
}

}  // namespace hearth::server
