#include "testing/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

extern char** environ;

namespace hearth::testing {
namespace {

bool Bind(int fd, int port, int* bound) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return false;
  }
  *bound = ntohs(addr.sin_port);
  return true;
}

// A port the kernel just handed out on loopback: free, unless another process takes it
// before redis-server binds it (Start then fails, and says so). At most 55535, with the
// port 10000 above it free too: a cluster node's bus listens there.
int FreePort() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0), bus = ::socket(AF_INET, SOCK_STREAM, 0);
    int port = 0, bus_port = 0;
    const bool ok = Bind(fd, 0, &port) && port <= 55535 && Bind(bus, port + 10000, &bus_port);
    ::close(fd);
    ::close(bus);
    if (ok) return port;
  }
  return 0;
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; break;
    case REDIS_REPLY_NIL: out.type = RedisReply::Type::kNil; break;
    case REDIS_REPLY_ARRAY: out.type = RedisReply::Type::kArray; break;
    default: break;
  }
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  out.integer = r->integer;
  for (size_t i = 0; i < r->elements; ++i) {
    if (r->element[i]->str != nullptr) out.elements.emplace_back(r->element[i]->str, r->element[i]->len);
  }
  return out;
}

}  // namespace

RedisServer::RedisServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {}

RedisServer::~RedisServer() {
  Stop();
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

bool RedisServer::Start() {
  if (pid_ > 0) return true;
  if (port_ == 0) port_ = FreePort();
  log_path_ = "/tmp/hearth-redis-" + std::to_string(::getpid()) + "-" + std::to_string(port_) + ".log";
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", "/tmp", "--daemonize", "no",
                                   // as docs/cache.md asks of a Redis for hearth
                                   "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"};
  for (std::string a : extra_args_) {
    const size_t at = a.find("{port}");
    if (at != std::string::npos) a.replace(at, 6, std::to_string(port_));
    args.push_back(a);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  if (posix_spawnp(&pid_, "redis-server", &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
  if (pid_ <= 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const RedisReply pong = Command({"PING"});
    if (pong.type == RedisReply::Type::kStatus && pong.str == "PONG") return true;
    if (pong.type == RedisReply::Type::kError && pong.str.rfind("NOAUTH", 0) == 0) return true;  // --requirepass
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: the port was taken, or bad arguments
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

RedisReply RedisServer::Command(const std::vector<std::string>& args) const {
  RedisReply out;
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr || c->err != 0) {
    out.str = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r != nullptr) {
    out = Convert(r);
    freeReplyObject(r);
  } else {
    out.str = c->errstr;
  }
  redisFree(c);
  return out;
}

std::vector<std::string> RedisServer::Keys(const std::string& pattern) const {
  std::vector<std::string> keys = Command({"KEYS", pattern}).elements;
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace hearth::testing
