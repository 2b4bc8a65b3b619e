// Hostile requests (tests only): malformed and adversarial HTTP requests for every route
// of `hearth serve`, generated systematically, for the hostile HTTP test
// (server/hostile_http_test.cc). Every case is one a correct server answers with a 4xx
// in the route's own error shape; none is a request the APIs accept.
//
// Kinds of case: bodies that are not a JSON object; every field at every depth of a
// valid request replaced by each JSON type it does not accept; out-of-range and
// unrepresentable numbers in every numeric field; invalid UTF-8 in every string field and
// key; every key duplicated; deep nesting; unknown roles and empty conversations; broken
// tool definitions and tool calls; wrong Content-Types; broken framing, oversized
// headers and URIs; bodies past the limit; bodies that stall; unknown routes and methods.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hearth::testing {

enum class Surface { kChat, kCompletions, kMessages, kCountTokens, kUtility, kRoutes };
const char* SurfaceName(Surface s);

struct HostileCase {
  Surface surface = Surface::kChat;
  std::string group;  // the kind of case, e.g. "wrong type"
  std::string what;   // this case, for failure messages, e.g. "messages[0].role = 7"
  std::string path;   // the route it targets, which picks the expected error shape; ""
                      // when the request line is unreadable (either shape will do)
  std::string bytes;  // the whole request as sent
  // The server answers only once its read timeout (10 s) passes: a body that stops
  // arriving. Such cases run side by side.
  bool waits_for_timeout = false;
  // Bytes HTTP has no answer for (a TLS handshake): closing the connection is right.
  bool may_close = false;
};

// All cases, for a server started with `--max-body max_body_bytes`: the two halves below.
std::vector<HostileCase> MakeHostileCases(size_t max_body_bytes);
// Bodies, sent well framed with Content-Type application/json (hostile_bodies.cc).
void AppendBodyCases(std::vector<HostileCase>* out);
// The HTTP around them: framing, headers, Content-Type, size, pace, routes
// (hostile_protocol.cc).
void AppendProtocolCases(size_t max_body_bytes, std::vector<HostileCase>* out);

// True when `path` is an Anthropic route (errors in the Anthropic shape).
bool IsAnthropicRoute(const std::string& path);

}  // namespace hearth::testing
