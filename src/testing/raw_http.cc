#include "testing/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>

namespace hearth::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of header `name` (lower case) in the header block, if present.
std::optional<std::string> Header(std::string_view head, std::string_view name) {
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t end = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(at + 2, (end == std::string_view::npos ? head.size() : end) - at - 2);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && Lower(line.substr(0, colon)) == name) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      return std::string(v);
    }
    at = end;
  }
  return std::nullopt;
}

// De-chunks `data`; nullopt while it is incomplete or malformed.
std::optional<std::string> Dechunk(std::string_view data) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t eol = data.find("\r\n", at);
    if (eol == std::string_view::npos) return std::nullopt;
    char* end = nullptr;
    const std::string size_text(data.substr(at, eol - at));
    const unsigned long n = std::strtoul(size_text.c_str(), &end, 16);
    if (end == size_text.c_str()) return std::nullopt;
    at = eol + 2;
    if (n == 0) return out;
    if (data.size() < at + n + 2) return std::nullopt;
    out.append(data.substr(at, n));
    at += n + 2;
  }
}

// Fills *res from what was read; true when it holds a whole response. `eof`: nothing
// more will come, so a body without a length ends here.
bool Parse(std::string_view in, bool eof, RawResponse* res) {
  // Interim responses (100 Continue) come before the one that counts.
  while (in.starts_with("HTTP/1.1 1") && in.find("\r\n\r\n") != std::string_view::npos) {
    in.remove_prefix(in.find("\r\n\r\n") + 4);
  }
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos || !in.starts_with("HTTP/1.")) return false;
  const std::string_view head = in.substr(0, head_end);
  const size_t sp = head.find(' ');
  if (sp == std::string_view::npos) return false;
  res->status = std::atoi(std::string(head.substr(sp + 1, 3)).c_str());
  res->content_type = Header(head, "content-type").value_or("");
  const std::string_view rest = in.substr(head_end + 4);
  if (auto te = Header(head, "transfer-encoding"); te && Lower(*te).find("chunked") != std::string::npos) {
    auto body = Dechunk(rest);
    if (!body) return false;
    res->body = *body;
    return true;
  }
  if (auto cl = Header(head, "content-length")) {
    const size_t n = std::strtoul(cl->c_str(), nullptr, 10);
    if (rest.size() < n) return false;
    res->body = std::string(rest.substr(0, n));
    return true;
  }
  if (!eof) return false;
  res->body = std::string(rest);
  return true;
}

}  // namespace

RawResponse Exchange(int port, std::string_view bytes, std::chrono::milliseconds timeout) {
  RawResponse res;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return res;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return res;
  }
  const auto deadline = Clock::now() + timeout;
  std::string_view to_send = bytes;
  bool can_send = true;
  std::string in;
  res.outcome = RawResponse::Outcome::kTimedOut;
  while (true) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    pollfd p{fd, POLLIN, 0};
    if (can_send && !to_send.empty()) p.events |= POLLOUT;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 50))) < 0 && errno != EINTR) break;
    if (p.revents & POLLOUT) {
      const ssize_t n = ::send(fd, to_send.data(), std::min<size_t>(to_send.size(), 1 << 16), MSG_NOSIGNAL);
      if (n > 0) {
        to_send.remove_prefix(static_cast<size_t>(n));
      } else if (errno != EAGAIN && errno != EINTR) {
        can_send = false;  // the server stopped reading; its answer may still be there
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[1 << 16];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        in.append(buf, static_cast<size_t>(n));
        if (Parse(in, false, &res)) {
          res.outcome = RawResponse::Outcome::kAnswered;
          break;
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        res.outcome = Parse(in, true, &res) ? RawResponse::Outcome::kAnswered : RawResponse::Outcome::kDropped;
        break;
      }
    }
  }
  ::close(fd);
  return res;
}

std::string MakeRequest(std::string_view method, std::string_view path, std::string_view body,
                        std::string_view content_type, std::string_view extra_headers) {
  std::string r = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!content_type.empty()) r += "Content-Type: " + std::string(content_type) + "\r\n";
  if (!body.empty() || method == "POST") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

const char* OutcomeName(RawResponse::Outcome outcome) {
  switch (outcome) {
    case RawResponse::Outcome::kAnswered: return "answered";
    case RawResponse::Outcome::kDropped: return "dropped";
    case RawResponse::Outcome::kTimedOut: return "timed out";
  }
  return "?";
}

}  // namespace hearth::testing
