// ServerClient: one benchmarked server, reached over plain HTTP (cpp-httplib). Sends
// streaming chat requests and times them; also the plain JSON calls (/apply-template,
// /tokenize, /v1/models, /props).
//
// Thread safety: one thread per ServerClient. Each call opens its own connection, so a
// request cut off mid-stream never leaves a half-read response on a reused socket.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "bench/usage.h"
#include "bench/workload.h"

namespace hearth::bench {

struct Endpoint {
  std::string url;     // as given
  std::string host;
  int port = 80;
  std::string prefix;  // path prefix before /v1/..., usually empty
};

// Accepts "http://host:port", "http://host:port/v1", "host:port". Errors: kInvalidArgument
// for https (not built in) or a malformed URL.
StatusOr<Endpoint> ParseEndpoint(const std::string& url);

// What one streamed chat request did, as the client saw it.
struct ChatOutcome {
  bool ok = false;
  std::string error;            // why not ok (HTTP status and message, or stream error)
  bool interrupted = false;     // the client cut the stream on purpose
  std::optional<double> ttft_ms;  // request sent -> first piece of generated output
  double e2e_ms = 0;            // request sent -> stream ended or was cut
  std::optional<double> decode_tps;
  std::string content, reasoning;  // what was streamed (partial when interrupted)
  int n_pieces = 0;
  Usage usage;
};

class ServerClient {
 public:
  ServerClient(Endpoint endpoint, std::string api_key, double timeout_s)
      : ep_(std::move(endpoint)), api_key_(std::move(api_key)), timeout_s_(timeout_s) {}

  // POSTs `body` to the chat route of `flavor` and reads the stream; with `cut_after`,
  // closes the connection once that many pieces of output arrived.
  ChatOutcome Chat(Flavor flavor, const Json& body, std::optional<int> cut_after) const;

  // Errors: kUnavailable when the server cannot be reached; kInvalidArgument for a
  // non-2xx answer (with the server's message) or a body that is not JSON.
  StatusOr<Json> GetJson(const std::string& path) const;
  StatusOr<Json> PostJson(const std::string& path, const Json& body) const;

  const Endpoint& endpoint() const { return ep_; }

 private:
  Endpoint ep_;
  std::string api_key_;
  double timeout_s_;
};

}  // namespace hearth::bench
