#include "bench/client.h"

#include <httplib.h>

#include <chrono>

namespace hearth::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

std::unique_ptr<httplib::Client> MakeClient(const Endpoint& ep, double timeout_s) {
  auto cli = std::make_unique<httplib::Client>(ep.host, ep.port);
  const auto secs = static_cast<time_t>(timeout_s);
  cli->set_connection_timeout(10, 0);
  cli->set_read_timeout(secs, 0);
  cli->set_write_timeout(secs, 0);
  cli->set_keep_alive(false);
  return cli;
}

httplib::Headers AuthHeaders(const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) {
    h.emplace("Authorization", "Bearer " + key);
    h.emplace("x-api-key", key);
  }
  h.emplace("anthropic-version", "2023-06-01");
  return h;
}

StatusOr<Json> ReadJsonResult(const httplib::Result& res, const std::string& what) {
  if (!res) return Unavailable(what + ": " + httplib::to_string(res.error()));
  if (res->status < 200 || res->status >= 300) {
    return InvalidArgument(what + ": HTTP " + std::to_string(res->status) + ": " + ErrorMessage(res->body));
  }
  Json j = Json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(what + ": the answer is not JSON");
  return j;
}

}  // namespace

StatusOr<Endpoint> ParseEndpoint(const std::string& url) {
  Endpoint ep;
  ep.url = url;
  std::string rest = url;
  if (rest.starts_with("https://")) return InvalidArgument("https is not supported (" + url + "); use http://");
  if (rest.starts_with("http://")) rest = rest.substr(7);
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) ep.prefix = rest.substr(slash);
  while (ep.prefix.ends_with("/")) ep.prefix.pop_back();
  if (ep.prefix.ends_with("/v1")) ep.prefix.resize(ep.prefix.size() - 3);
  const size_t colon = hostport.rfind(':');
  ep.host = hostport.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      ep.port = std::stoi(hostport.substr(colon + 1));
    } catch (...) {
      return InvalidArgument("bad port in URL " + url);
    }
  }
  if (ep.host.empty() || ep.port <= 0 || ep.port > 65535) return InvalidArgument("bad server URL " + url);
  return ep;
}

ChatOutcome ServerClient::Chat(Flavor flavor, const Json& body, std::optional<int> cut_after) const {
  ChatOutcome out;
  StreamReader reader(flavor);
  std::string raw;  // the body, for error answers
  Clock::time_point first, last;
  bool cut = false;
  auto cli = MakeClient(ep_, timeout_s_);
  const std::string path = ep_.prefix + (flavor == Flavor::kOpenAI ? "/v1/chat/completions" : "/v1/messages");
  const Clock::time_point start = Clock::now();
  auto res = cli->Post(path, AuthHeaders(api_key_), DumpJson(body), "application/json",
                       [&](const char* data, size_t len) {
                         if (raw.size() < 4096) raw.append(data, std::min(len, size_t{4096}));
                         const int n = reader.Feed(std::string_view(data, len));
                         if (n > 0) {
                           const Clock::time_point now = Clock::now();
                           if (reader.n_pieces() == n) first = now;
                           last = now;
                         }
                         if (cut_after && reader.n_pieces() >= *cut_after) {
                           cut = true;
                           return false;  // closes the connection mid-stream
                         }
                         return true;
                       });
  const Clock::time_point end = Clock::now();
  out.e2e_ms = Ms(start, end);
  out.content = reader.content();
  out.reasoning = reader.reasoning();
  out.n_pieces = reader.n_pieces();
  out.usage = reader.usage();
  if (reader.n_pieces() > 0) out.ttft_ms = Ms(start, first);
  if (cut) {
    out.ok = true;
    out.interrupted = true;
    return out;
  }
  if (!res) {
    out.error = "connection: " + httplib::to_string(res.error());
    return out;
  }
  if (res->status != 200) {
    out.error = "HTTP " + std::to_string(res->status) + ": " + ErrorMessage(raw);
    return out;
  }
  if (reader.error()) {
    out.error = "stream error: " + *reader.error();
    return out;
  }
  out.ok = true;
  const int n_decoded = out.usage.completion_tokens.value_or(reader.n_pieces());
  const double decode_ms = Ms(first, last);
  if (n_decoded > 1 && reader.n_pieces() > 1 && decode_ms > 0) out.decode_tps = (n_decoded - 1) / (decode_ms / 1000.0);
  return out;
}

StatusOr<Json> ServerClient::GetJson(const std::string& path) const {
  auto cli = MakeClient(ep_, timeout_s_);
  return ReadJsonResult(cli->Get(ep_.prefix + path, AuthHeaders(api_key_)), "GET " + path);
}

StatusOr<Json> ServerClient::PostJson(const std::string& path, const Json& body) const {
  auto cli = MakeClient(ep_, timeout_s_);
  return ReadJsonResult(cli->Post(ep_.prefix + path, AuthHeaders(api_key_), DumpJson(body), "application/json"),
                        "POST " + path);
}

}  // namespace hearth::bench
