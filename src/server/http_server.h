// HttpServer: the HTTP front of hearth. Parses requests with the API front ends
// (src/api/), builds tasks (RequestBuilder), submits them to the EngineLoop, and writes
// responses, streaming or not.
//
// Threads: Listen blocks the calling thread; handlers run on httplib's worker pool and
// never touch the engine except through EngineLoop::Submit and RequestStream. Stop may
// be called from any thread (e.g. a signal watcher).
//
// Invariants:
//  1. Every handler answers in the shape of the API it serves (OpenAI or Anthropic),
//     also for errors; no exception escapes a handler (a wrapper turns it into a 500).
//  2. A client that goes away cancels its request within one engine step.
//  3. Without API keys every route is open; with them every route but /health and the
//     web page at / (which holds no data: it asks for a key and sends it) needs
//     "Authorization: Bearer KEY" or "x-api-key: KEY", compared in constant time.
//  4. A key's requests live in that key's cache namespace (ApiKey::cache_namespace, see
//     api_keys.h), whatever other keys are configured; GET /v1/cache shows a key only the
//     conversations, tree nodes and requests of its namespace.
//  5. No connection waits without bound: a bounded pool, a bounded queue of pending
//     connections and read timeouts (HttpConfig) keep slow clients from starving others.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "chat/stabilizer.h"
#include "engine/chat_template.h"
#include "engine/model.h"
#include "server/api_keys.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/request_builder.h"
#include "server/response_store.h"
#include "server/warm_ahead.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace hearth::api::responses {
struct ResponsesRequest;
}

namespace hearth::server {

struct HttpConfig {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: pick a free port (see HttpServer::port)
  // Accepted keys (MakeApiKeys); none: no authentication. Each key's requests have its
  // cache namespace: one client's conversations never resume from another's states.
  std::vector<ApiKey> api_keys;
  bool cors = false;             // answer browsers' cross-origin requests
  size_t max_body_bytes = 32u << 20;
  std::string model_alias;       // the model id reported by /v1/models
  bool warm_ahead = true;        // prepare each conversation's next turn while idle
  chat::Stabilizer stabilizer;   // --stabilize rules
  ChatDefaults chat_defaults;    // --chat-template-kwargs, --reasoning-format
  // Connections. Each is served by one worker thread (a generation holds its worker until
  // it ends): at most n_http_threads of them, with up to max_pending_connections more
  // waiting for one; beyond that a new connection is closed at once instead of queueing.
  int n_http_threads = 32;
  int max_pending_connections = 64;
  // A connection silent this long while its request is being read (or before its next
  // request: capped at 5 s) is dropped, so a client trickling its headers cannot hold a
  // worker for minutes. A write that cannot proceed this long (a client that stopped
  // reading) ends the response. Neither limits a response's length: a stream waiting on
  // a long prefill writes keep-alives every 5 s.
  int read_timeout_s = 10;
  int write_timeout_s = 30;
  // /v1/responses: this many recent responses, within this many bytes, are kept for
  // previous_response_id and GET /v1/responses/{id} (ResponseStore), per API key.
  size_t max_stored_responses = 1024;
  size_t max_stored_response_bytes = 64u << 20;
};

class HttpServer {
 public:
  // All references must outlive the server. REQUIRES: `engine` not started yet (the
  // server registers its warm-ahead callbacks).
  HttpServer(HttpConfig config, const engine::Model& model, const engine::ChatTemplate& chat_template,
             EngineLoop& engine);
  ~HttpServer();

  // Binds the port. Errors: kUnavailable when the address cannot be bound.
  Status Bind();
  // Serves until Stop. REQUIRES: Bind() succeeded.
  void Serve();
  void Stop();
  int port() const { return port_; }

  // Connections the pool accepted (queued for a worker) and those a worker has started
  // serving since Bind; a refused one counts in neither. Any thread may read them (tests
  // wait on them to know where a connection stands).
  struct ConnectionCounts {
    int64_t accepted = 0;
    int64_t taken = 0;
  };
  ConnectionCounts connections() const { return {n_accepted_.load(), n_taken_.load()}; }

 private:
  // The configured key the request carries, or nullptr.
  const ApiKey* FindKey(const httplib::Request& req) const;
  void IsolateByKey(const httplib::Request& req, api::GenerationRequest& request) const;
  // Whether a cache namespace is the caller's (every one without API keys).
  std::function<bool(const std::string& ns)> VisibleNamespaces(const httplib::Request& req) const;
  // The namespace a key's stored responses live in ("" without keys).
  std::string ResponsesNamespace(const httplib::Request& req) const;
  // POST /v1/responses after parsing (responses_route.cc).
  void HandleResponses(api::responses::ResponsesRequest& request, const httplib::Request& req, httplib::Response& res,
                       std::chrono::steady_clock::time_point received);
  // GET and DELETE /v1/responses/{id}: a stored response, found only under the caller's key.
  void GetStoredResponse(const httplib::Request& req, httplib::Response& res);
  void DeleteStoredResponse(const httplib::Request& req, httplib::Response& res);
  // Called once, by the constructor; the functions below are its parts.
  void RegisterRoutes();
  void ConfigureConnections();
  // Before any route: oversized heads, CORS, API keys (invariant 3).
  void InstallRequestGate();
  void InstallErrorBodies();
  // /v1/chat/completions, /v1/completions, /v1/messages.
  void RegisterGenerationRoutes();
  // POST /v1/responses, and GET and DELETE of a stored one.
  void RegisterResponsesRoutes();
  // /v1/models, /health, /metrics, /v1/cache and the web page.
  void RegisterServerRoutes();
  // /v1/messages/count_tokens, /tokenize, /detokenize, /apply-template.
  void RegisterPromptRoutes();

  HttpConfig config_;
  const engine::Model& model_;
  const engine::ChatTemplate& template_;
  EngineLoop& engine_;
  RequestBuilder builder_;
  ResponseStore responses_;
  RequestMetrics request_metrics_;  // fed by the engine's finished callback
  std::unique_ptr<WarmAhead> warm_ahead_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<int64_t> n_accepted_{0};
  std::atomic<int64_t> n_taken_{0};
};

}  // namespace hearth::server
