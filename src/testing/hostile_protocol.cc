// Hostile HTTP around well-formed bodies: Content-Types, framing, headers and URIs past
// their limits, bodies past --max-body, bodies that stall, unknown routes and methods.
#include <string>
#include <vector>

#include "testing/hostile_requests.h"
#include "testing/raw_http.h"

namespace hearth::testing {
namespace {

struct PostRoute {
  Surface surface;
  std::string path;
  std::string body;  // a valid request
};

const std::vector<PostRoute>& PostRoutes() {
  static const std::vector<PostRoute> r = {
      {Surface::kChat, "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})"},
      {Surface::kCompletions, "/v1/completions", R"({"prompt": "Once", "max_tokens": 2})"},
      {Surface::kMessages, "/v1/messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})"},
      {Surface::kCountTokens, "/v1/messages/count_tokens", R"({"messages": [{"role": "user", "content": "hi"}]})"},
      {Surface::kUtility, "/tokenize", R"({"content": "hi"})"},
      {Surface::kUtility, "/detokenize", R"({"tokens": [1, 2]})"},
      {Surface::kUtility, "/apply-template", R"({"messages": [{"role": "user", "content": "hi"}]})"},
  };
  return r;
}

// The head of a POST without its blank line, for cases that add headers of their own.
std::string Head(const std::string& path, const std::string& request_line_tail = " HTTP/1.1") {
  return "POST " + path + request_line_tail + "\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
}

std::string Chunked(const std::string& body) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  return std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
}

void AppendFraming(const PostRoute& r, std::vector<HostileCase>* out) {
  auto add = [&](const std::string& group, const std::string& what, std::string bytes, std::string path = "") {
    // "-": a request line the server cannot read names no route, so no API's shape.
    out->push_back({r.surface, group, what, path.empty() ? r.path : path == "-" ? "" : path, std::move(bytes)});
  };
  const std::string& b = r.body;
  const std::string json = "Content-Type: application/json\r\n";
  const std::string length = "Content-Length: " + std::to_string(b.size()) + "\r\n";
  for (const std::string& type : std::vector<std::string>{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                 "application/xml", "text/html; charset=utf-8", "application/jsonp", "json",
                                 "application/octet-stream", "image/png", "text/json5"}) {
    add("wrong content type", "Content-Type: " + type, MakeRequest("POST", r.path, b, type));
  }
  add("oversized headers", "a 9000-byte header", MakeRequest("POST", r.path, b, "application/json",
                                                             "X-Big: " + std::string(9000, 'a') + "\r\n"));
  add("oversized headers", "a 100 KB header", MakeRequest("POST", r.path, b, "application/json",
                                                          "X-Big: " + std::string(100000, 'a') + "\r\n"));
  std::string many, wide;
  for (int i = 0; i < 150; ++i) many += "X-N" + std::to_string(i) + ": v\r\n";
  for (int i = 0; i < 90; ++i) wide += "X-W" + std::to_string(i) + ": " + std::string(8000, 'w') + "\r\n";
  add("oversized headers", "150 headers", MakeRequest("POST", r.path, b, "application/json", many));
  add("oversized headers", "90 headers of 8000 bytes", MakeRequest("POST", r.path, b, "application/json", wide));
  add("oversized headers", "a 9000-byte URI", MakeRequest("POST", r.path + "?q=" + std::string(9000, 'q'), b));
  for (const std::string& bad : std::vector<std::string>{"-1", "abc", "99999999999999999999999", "1e3", "0x10", " "}) {
    add("broken framing", "Content-Length: " + bad, Head(r.path) + json + "Content-Length: " + bad + "\r\n\r\n" + b);
  }
  add("broken framing", "two differing Content-Lengths",
      Head(r.path) + json + length + "Content-Length: " + std::to_string(b.size() + 3) + "\r\n\r\n" + b + "xyz");
  add("broken framing", "Transfer-Encoding and Content-Length",
      Head(r.path) + json + length + "Transfer-Encoding: chunked\r\n\r\n" + Chunked(b));
  add("broken framing", "Transfer-Encoding: gzip", Head(r.path) + json + "Transfer-Encoding: gzip\r\n\r\n" + b);
  add("broken framing", "a chunk size that is not hex",
      Head(r.path) + json + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + b + "\r\n0\r\n\r\n");
  add("broken framing", "a chunk size past 64 bits",
      Head(r.path) + json + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n" + b + "\r\n0\r\n\r\n");
  add("broken framing", "a body shorter than its chunk size",
      Head(r.path) + json + "Transfer-Encoding: chunked\r\n\r\n1000\r\n" + b + "\r\n0\r\n\r\n");
  for (const std::string& coding : std::vector<std::string>{"gzip", "deflate", "br", "zstd", "rot13"}) {
    add("broken framing", "Content-Encoding: " + coding + " over plain text",
        Head(r.path) + json + length + "Content-Encoding: " + coding + "\r\n\r\n" + b);
  }
  add("broken framing", "a body cut short, then a pipelined request",
      Head(r.path) + json + "Content-Length: 5\r\n\r\n" + b + "GET /health HTTP/1.1\r\n\r\n");
  add("broken headers", "a header without a colon", Head(r.path) + json + length + "NoColon\r\n\r\n" + b);
  add("broken headers", "a header name with a space", Head(r.path) + json + length + "Bad Name: x\r\n\r\n" + b);
  add("broken headers", "a NUL byte in a header",
      Head(r.path) + json + length + std::string("X-A: a\0b\r\n\r\n", 11) + b);
  add("broken headers", "a folded header line", Head(r.path) + json + length + "X-A: a\r\n  folded\r\n\r\n" + b);
  add("broken headers", "an empty header name", Head(r.path) + json + length + ": v\r\n\r\n" + b);
  add("broken request line", "a fourth word in the request line", Head(r.path, " HTTP/1.1 x") + json + length + "\r\n" + b, "-");
  add("broken request line", "no HTTP version", Head(r.path, "") + json + length + "\r\n" + b, "-");
  add("broken request line", "HTTP/9.9", Head(r.path, " HTTP/9.9") + json + length + "\r\n" + b, "-");
  add("broken request line", "HTTP/0.9 style", "POST " + r.path + "\r\n\r\n", "-");
  add("broken request line", "a lower-case method", "post" + Head(r.path).substr(4) + json + length + "\r\n" + b, "-");
  add("broken request line", "a NUL byte in the path",
      "POST " + r.path + std::string("\0x", 2) + " HTTP/1.1\r\nConnection: close\r\n" + json + length + "\r\n" + b, "-");
}

// Bodies past the limit, whether announced, sent or streamed in chunks.
void AppendOversized(const PostRoute& r, size_t max_body, std::vector<HostileCase>* out) {
  const std::string big = R"({"content": ")" + std::string(max_body + 1024, 'a') + R"("})";
  out->push_back({r.surface, "body too large", "a whole body past --max-body", r.path, MakeRequest("POST", r.path, big)});
  out->push_back({r.surface, "body too large", "Content-Length: 10^12, no body", r.path,
                  Head(r.path) + "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"});
  std::string chunks;
  for (size_t sent = 0; sent < max_body + 65536; sent += 16384) chunks += "4000\r\n" + std::string(16384, 'c') + "\r\n";
  out->push_back({r.surface, "body too large", "a chunked body past --max-body", r.path,
                  Head(r.path) + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n",
                  {}, {}});
}

// Bodies that stop arriving: the server's read timeout (10 s) answers them.
void AppendSlow(const PostRoute& r, std::vector<HostileCase>* out) {
  const std::string& b = r.body;
  out->push_back({r.surface, "slow body", "half a body, then silence", r.path,
                  Head(r.path) + "Content-Type: application/json\r\nContent-Length: " + std::to_string(b.size()) +
                      "\r\n\r\n" + b.substr(0, b.size() / 2),
                  true});
  out->push_back({r.surface, "slow body", "one chunk, then silence", r.path,
                  Head(r.path) + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n" +
                      b.substr(0, 4) + "\r\n",
                  true});
}

// Routes that do not exist and methods a route does not take.
void AppendRoutes(std::vector<HostileCase>* out) {
  const std::vector<std::string> paths = {
      "/v1", "/v1/", "/v1/chat", "/v1/chat/completion", "/v1/chat/completions/", "/v1/chat/completions/x",
      "/V1/chat/completions", "/v1//chat/completions", "/v1/chat/completions%00", "/v1/%2e%2e/health",
      "/../../etc/passwd", "/v1/messages/batches", "/v1/messages/count_tokens/x", "/v1/messages/", "/v1/embeddings",
      "/v1/models/x", "/v2/chat/completions", "/api/chat", "/tokenize/x", "/%ff%fe", "/\xff\xfe", "/health/",
      "/metrics/x", "/v1/cache/x", "/" + std::string(4000, 'a'), "/v1/responses", "/completion", "/props",
      "/v1/chat/completions;x"};
  for (const std::string& path : paths) {
    for (const std::string& method : std::vector<std::string>{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
      out->push_back({Surface::kRoutes, "unknown route", method + " " + path, path, MakeRequest(method, path, "")});
      out->push_back({Surface::kRoutes, "unknown route", method + " " + path + " with a body", path,
                      MakeRequest(method, path, R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})"),
                      {}, {}});
    }
  }
  for (const PostRoute& r : PostRoutes()) {
    for (const std::string& method : std::vector<std::string>{"GET", "PUT", "DELETE", "PATCH"}) {
      out->push_back({Surface::kRoutes, "wrong method", method + " " + r.path, r.path, MakeRequest(method, r.path, r.body)});
    }
  }
  for (const std::string& path : std::vector<std::string>{"/", "/health", "/metrics", "/v1/models", "/v1/cache"}) {
    for (const std::string& method : std::vector<std::string>{"POST", "PUT", "DELETE", "PATCH"}) {
      out->push_back({path == "/v1/cache" ? Surface::kUtility : Surface::kRoutes, "wrong method", method + " " + path, path,
                      MakeRequest(method, path, "{}")});
    }
  }
  // Bytes that are no HTTP request at all.
  for (const std::string& junk : std::vector<std::string>{std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), std::string("GARBAGE\r\n\r\n"),
                                 std::string("\r\n\r\n\r\n"), std::string(" / HTTP/1.1\r\n\r\n"),
                                 std::string("GET\r\n\r\n"), std::string(9000, 'G') + " / HTTP/1.1\r\n\r\n"}) {
    out->push_back({Surface::kRoutes, "not HTTP", "bytes " + std::to_string(junk.size()), "", junk});
  }
  HostileCase tls{Surface::kRoutes, "not HTTP", "a TLS ClientHello", "",
                  std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)};
  tls.waits_for_timeout = true;
  tls.may_close = true;
  out->push_back(tls);
}

}  // namespace

const char* SurfaceName(Surface s) {
  switch (s) {
    case Surface::kChat: return "/v1/chat/completions";
    case Surface::kCompletions: return "/v1/completions";
    case Surface::kMessages: return "/v1/messages";
    case Surface::kCountTokens: return "/v1/messages/count_tokens";
    case Surface::kUtility: return "/tokenize, /detokenize, /apply-template, /v1/cache";
    case Surface::kRoutes: return "unknown routes and methods, non-HTTP bytes";
  }
  return "?";
}

bool IsAnthropicRoute(const std::string& path) { return path.starts_with("/v1/messages"); }

void AppendProtocolCases(size_t max_body_bytes, std::vector<HostileCase>* out) {
  for (const PostRoute& r : PostRoutes()) {
    AppendFraming(r, out);
    AppendOversized(r, max_body_bytes, out);
    AppendSlow(r, out);
  }
  AppendRoutes(out);
}

std::vector<HostileCase> MakeHostileCases(size_t max_body_bytes) {
  std::vector<HostileCase> cases;
  AppendBodyCases(&cases);
  AppendProtocolCases(max_body_bytes, &cases);
  return cases;
}

}  // namespace hearth::testing
