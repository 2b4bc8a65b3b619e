// Raw HTTP/1.1 exchanges over loopback (tests only), for requests an HTTP library will
// not send: malformed request lines and headers, bodies that lie about their length,
// bodies that stall, bodies past the server's limit.
//
// Thread safety: pure functions; each call opens its own connection.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace hearth::testing {

struct RawResponse {
  enum class Outcome {
    kAnswered,  // a whole response (status line, headers, body) arrived
    kDropped,   // the connection ended (or was reset) before a whole response
    kTimedOut,  // nothing complete within the timeout
  };
  Outcome outcome = Outcome::kDropped;
  int status = 0;
  std::string content_type;  // the Content-Type header's value, as sent
  std::string body;          // de-chunked
};

// Connects to 127.0.0.1:`port`, sends `bytes` (reading while it sends, so that a server
// answering early is heard) and reads one response. A response that arrives before
// everything is sent ends the exchange.
RawResponse Exchange(int port, std::string_view bytes, std::chrono::milliseconds timeout);

// A request with "Connection: close" and, when `body` is given, its Content-Length.
// `content_type` empty: no Content-Type header. `extra_headers`: whole lines, each
// ending in "\r\n".
std::string MakeRequest(std::string_view method, std::string_view path, std::string_view body,
                        std::string_view content_type = "application/json", std::string_view extra_headers = {});

const char* OutcomeName(RawResponse::Outcome outcome);

}  // namespace hearth::testing
