// RedisServer (tests only): a real redis-server child process on a free loopback port,
// with no persistence and the eviction docs/cache.md asks for (256 MB, allkeys-lru), and raw commands to it (to delete or forge keys behind a store's
// back). Stop and Start again keep the port, to test a Redis that goes down and returns.
// The process is killed and reaped on destruction.
//
// Thread safety: one thread uses a RedisServer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::testing {

struct RedisReply {
  enum class Type { kNone, kString, kStatus, kError, kInteger, kNil, kArray } type = Type::kNone;
  std::string str;  // kString, kStatus, kError; kNone: why there was no reply
  int64_t integer = 0;
  std::vector<std::string> elements;  // kArray of strings
};

class RedisServer {
 public:
  // `extra_args` go to redis-server after hearth's own (e.g. {"--maxmemory", "2mb"}); in
  // each, "{port}" becomes the server's port (a cluster node's config file name).
  explicit RedisServer(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts the server (on the port it had before, else a free one) and waits until it
  // answers PING, at most 10 s. False when it does not (its log: log_path()).
  bool Start();
  // SIGKILL and reap: gone at once, as a crash.
  void Stop();
  // SIGSTOP / SIGCONT: a Redis that accepts connections and never answers.
  void Pause();
  void Resume();

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& log_path() const { return log_path_; }

  // One command on a fresh connection; binary-safe arguments.
  RedisReply Command(const std::vector<std::string>& args) const;
  // KEYS pattern, sorted.
  std::vector<std::string> Keys(const std::string& pattern) const;

 private:
  std::vector<std::string> extra_args_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace hearth::testing
