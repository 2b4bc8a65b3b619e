// RedisConnection: one hiredis connection to one Redis, for RedisStore (redis_store.h).
// Internal to src/cache/.
//
// A connection is made on first use and again after any wire error, but not more often
// than the backoff allows: after a failure, calls within the backoff window fail at once
// (kUnavailable, with the last error) instead of each paying the connect timeout. The
// backoff doubles from Timeouts::backoff_min_ms up to backoff_max_ms and resets when a
// connect succeeds.
//
// Every socket operation is bounded: connecting by connect_ms, each send and receive by
// command_ms (SO_SNDTIMEO / SO_RCVTIMEO), so a Redis that is down or stalled costs a call
// at most about those bounds.
//
// No TLS: hiredis 0.14 (Debian 12's) has none, so `rediss://` is refused by ParseRedisUrl.
//
// Thread safety: a RedisConnection is used by one thread at a time (the caller locks).
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hearth::cache {

struct RedisEndpoint {
  std::string host;       // empty for a unix socket
  int port = 6379;
  std::string unix_path;  // set for unix:///path
  std::string user, password;
  int db = 0;
  std::string Describe() const;  // "host:port" or the socket path, never the password
};

// Parses `redis://[user:password@]host[:port][/db]` (host may be `[ipv6]`; user and
// password are percent-decoded; no user means the password alone: `redis://:pw@host`)
// and `unix:///path/to/socket`. Errors: kInvalidArgument naming what is wrong,
// kUnimplemented for `rediss://` (TLS, which this build's hiredis lacks).
StatusOr<RedisEndpoint> ParseRedisUrl(const std::string& url);

struct RedisTimeouts {
  int connect_ms = 500;
  int command_ms = 2000;
  int backoff_min_ms = 100;
  int backoff_max_ms = 5000;
};

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

// One command's arguments. The views must stay live until the call that takes them returns.
using RedisArgs = std::vector<std::string_view>;

class RedisConnection {
 public:
  RedisConnection(RedisEndpoint endpoint, RedisTimeouts timeouts);

  // Connects when not connected and the backoff allows. Ok when connected.
  Status Ensure();

  // Sends command(i) for i in [0, n) and hands each reply to on_reply(i, reply), in order,
  // with at most `window` commands sent and unanswered (hiredis copies a command's
  // arguments into its buffer: the window bounds that memory). Error replies (-ERR, -OOM)
  // are replies: on_reply sees them. When on_reply returns false no more commands are sent
  // (the replies to those sent are read and dropped). Returns kUnavailable on a wire error
  // (the connection is dropped; some replies may not have been seen) or when not connected.
  Status Pipeline(size_t n, const std::function<RedisArgs(size_t)>& command,
                  const std::function<bool(size_t, const redisReply&)>& on_reply, size_t window);
  // One command; its reply (an error reply too), or kUnavailable.
  StatusOr<RedisReplyPtr> Command(const RedisArgs& args);

  bool connected() const { return ctx_ != nullptr; }
  const RedisEndpoint& endpoint() const { return endpoint_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const { redisFree(c); }
  };
  Status Connect();
  Status Fail(const std::string& what);  // drops the connection, starts the backoff

  RedisEndpoint endpoint_;
  RedisTimeouts timeouts_;
  std::unique_ptr<redisContext, ContextDeleter> ctx_;
  std::chrono::steady_clock::time_point next_try_{};
  int backoff_ms_ = 0;
  bool proven_ = false;  // connected and set up since the last failure
  std::string last_error_;
};

// "hello" for a string reply, the message for an error; for logs and `why`.
std::string DescribeReply(const redisReply& r);

}  // namespace hearth::cache
