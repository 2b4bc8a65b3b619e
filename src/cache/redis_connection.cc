#include "cache/redis_connection.h"

#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace hearth::cache {
namespace {

timeval ToTimeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

bool ParseInt(std::string_view s, int lo, int hi, int* out) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool PercentDecode(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size()) return false;
    auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (ec != std::errc() || end != s.data() + i + 3) return false;
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

}  // namespace

std::string RedisEndpoint::Describe() const {
  if (!unix_path.empty()) return unix_path;
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

StatusOr<RedisEndpoint> ParseRedisUrl(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("bad Redis URL \"" + url + "\": " + why +
                           " (want redis://[user:password@]host:port[/db] or unix:///path)");
  };
  RedisEndpoint ep;
  if (url.rfind("rediss://", 0) == 0) {
    return Unimplemented("Redis over TLS (rediss://) is not supported: this build's hiredis (0.14) has no TLS; "
                         "use redis:// on a trusted network, or a local TLS tunnel (stunnel, spiped)");
  }
  if (url.rfind("unix://", 0) == 0) {
    ep.unix_path = url.substr(7);
    if (ep.unix_path.empty() || ep.unix_path[0] != '/') return bad("a unix socket needs an absolute path");
    return ep;
  }
  if (url.rfind("redis://", 0) != 0) return bad("unknown scheme");
  std::string_view rest = std::string_view(url).substr(8);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseInt(db, 0, 1 << 20, &ep.db)) return bad("the database must be a number");
  }
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    std::string_view user = userinfo.substr(0, colon);
    std::string_view password = colon == std::string_view::npos ? std::string_view() : userinfo.substr(colon + 1);
    if (colon == std::string_view::npos) std::swap(user, password);  // redis://pw@host: a password alone
    if (!PercentDecode(user, &ep.user) || !PercentDecode(password, &ep.password)) return bad("bad %-escape");
  }
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed [ in the host");
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("junk after the host");
    if (!after.empty()) port = after.substr(1);
    if (!after.empty() && port.empty()) return bad("empty port");
  } else {
    const size_t colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (ep.host.empty()) return bad("no host");
  for (char c : ep.host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '@') return bad("bad host");
  }
  if (!port.empty() && !ParseInt(port, 1, 65535, &ep.port)) return bad("the port must be a number in 1-65535");
  return ep;
}

RedisConnection::RedisConnection(RedisEndpoint endpoint, RedisTimeouts timeouts)
    : endpoint_(std::move(endpoint)), timeouts_(timeouts) {}

Status RedisConnection::Ensure() {
  if (ctx_) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (now < next_try_) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_try_ - now).count();
    return Unavailable(last_error_ + " (next try in " + std::to_string(ms) + " ms)");
  }
  return Connect();
}

Status RedisConnection::Connect() {
  redisContext* c = endpoint_.unix_path.empty()
                        ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, ToTimeval(timeouts_.connect_ms))
                        : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), ToTimeval(timeouts_.connect_ms));
  if (c == nullptr) return Fail("cannot connect to Redis at " + endpoint_.Describe() + ": out of memory");
  ctx_.reset(c);
  if (c->err != 0) return Fail("cannot connect to Redis at " + endpoint_.Describe() + ": " + c->errstr);
  if (redisSetTimeout(c, ToTimeval(timeouts_.command_ms)) != REDIS_OK) {
    return Fail("cannot set timeouts on the connection to " + endpoint_.Describe());
  }
  if (endpoint_.unix_path.empty()) static_cast<void>(redisEnableKeepAlive(c));
  auto expect_ok = [&](const RedisArgs& args, const char* what) {
    auto r = Command(args);
    if (!r.ok()) return r.status();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return Fail(std::string(what) + " refused by Redis at " + endpoint_.Describe() + ": " + DescribeReply(**r));
    }
    return Status::Ok();
  };
  if (!endpoint_.password.empty()) {
    RedisArgs auth = {"AUTH"};
    if (!endpoint_.user.empty()) auth.push_back(endpoint_.user);
    auth.push_back(endpoint_.password);
    HEARTH_RETURN_IF_ERROR(expect_ok(auth, "AUTH"));
  }
  if (endpoint_.db != 0) {
    const std::string db = std::to_string(endpoint_.db);
    HEARTH_RETURN_IF_ERROR(expect_ok({"SELECT", db}, "SELECT"));
  }
  backoff_ms_ = 0;
  next_try_ = {};
  proven_ = true;
  return Status::Ok();
}

Status RedisConnection::Fail(const std::string& what) {
  // A connection that worked may just have been closed by a restart: the first reconnect
  // is tried at once; failed connects back off.
  const bool was_up = proven_;
  proven_ = false;
  ctx_.reset();
  last_error_ = what;
  if (!was_up) {
    backoff_ms_ = backoff_ms_ == 0 ? timeouts_.backoff_min_ms : std::min(2 * backoff_ms_, timeouts_.backoff_max_ms);
    next_try_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms_);
  }
  return Unavailable(what);
}

Status RedisConnection::Pipeline(size_t n, const std::function<RedisArgs(size_t)>& command,
                                 const std::function<bool(size_t, const redisReply&)>& on_reply, size_t window) {
  if (!ctx_) return Unavailable(last_error_.empty() ? "not connected" : last_error_);
  window = std::max<size_t>(window, 1);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  size_t sent = 0;
  bool more = true;  // on_reply wants the rest
  for (size_t got = 0; got < sent || (more && got < n); ++got) {
    for (; more && sent < n && sent - got < window; ++sent) {
      const RedisArgs args = command(sent);
      argv.clear();
      lens.clear();
      for (std::string_view a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
        return Fail("Redis at " + endpoint_.Describe() + ": cannot queue a command: " + ctx_->errstr);
      }
    }
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
      const std::string err = ctx_->err != 0 ? ctx_->errstr : "";
      return Fail("Redis at " + endpoint_.Describe() + ": " + (err.empty() ? "connection lost" : err));
    }
    RedisReplyPtr reply(static_cast<redisReply*>(raw));
    if (more) more = on_reply(got, *reply);  // once it said stop, the replies in flight are only read
  }
  return Status::Ok();
}

StatusOr<RedisReplyPtr> RedisConnection::Command(const RedisArgs& args) {
  if (!ctx_) return Unavailable(last_error_.empty() ? "not connected" : last_error_);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data());
  if (raw == nullptr) {
    const std::string err = ctx_->err != 0 ? ctx_->errstr : "";
    return Fail("Redis at " + endpoint_.Describe() + ": " + (err.empty() ? "connection lost" : err));
  }
  return RedisReplyPtr(static_cast<redisReply*>(raw));
}

std::string DescribeReply(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r.str, r.len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r.integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY:
      return "(array of " + std::to_string(r.elements) + ")";
    default:
      return "(reply type " + std::to_string(r.type) + ")";
  }
}

}  // namespace hearth::cache
