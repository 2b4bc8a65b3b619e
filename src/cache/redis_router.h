// RedisRouter: the connections one thread of RedisStore (redis_store.h) holds to a single
// Redis or to the nodes of a Redis Cluster, reached from one seed URL. Internal to
// src/cache/.
//
// Every key goes to the seed until a `MOVED <slot> <host:port>` reply names another node
// for its slot; from then on keys of that slot go there (a connection to that node is made
// on first use, with the seed's password and timeouts). `ASK` (a slot being migrated) is
// followed for the one command only, preceded by ASKING. A single Redis never redirects,
// so there the router is one connection.
//
// Thread safety: a RedisRouter is used by one thread at a time (the caller locks).
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/redis_connection.h"

namespace hearth::cache {

// The Redis Cluster slot of `key`: CRC16 of its hash tag (the text between the first '{'
// and the next '}', when not empty) or of the whole key, mod 16384.
int RedisKeySlot(std::string_view key);

class RedisRouter {
 public:
  RedisRouter(RedisEndpoint seed, RedisTimeouts timeouts);

  // The connection that serves `key`'s slot (not necessarily connected: Ensure it).
  RedisConnection& For(std::string_view key);

  struct Redirect {
    RedisConnection* to = nullptr;
    bool ask = false;  // send ASKING first, and learn nothing
  };
  // When `r` is a MOVED or ASK error: where to send the command again (a MOVED is learned
  // for its slot). nullopt for any other reply.
  std::optional<Redirect> Follow(const redisReply& r);

  // Runs command(i), i in [0, n), whose keys all share `key`'s slot, as one pipeline on the
  // node serving that slot (RedisConnection::Pipeline: on_reply, window). Connects per the
  // backoff; when the connection is found closed (a restart), runs again on a fresh one;
  // when the first reply redirects (MOVED, ASK), runs again where it points, once. Before
  // each run `restart` is called, so the caller can forget replies of a run that failed.
  Status RunOnSlot(std::string_view key, size_t n, const std::function<RedisArgs(size_t)>& command,
                   const std::function<bool(size_t, const redisReply&)>& on_reply, size_t window,
                   const std::function<void()>& restart);

  // GET of each of `keys` (any slots), pipelined per node, redirects followed; on_value(i,
  // reply) once per key answered (a string, nil or an error). Not ok when a node could not
  // be reached: the keys it serves were not answered, the others were.
  Status GetMany(const std::vector<std::string>& keys, const std::function<void(size_t, const redisReply&)>& on_value);

  RedisConnection& seed() { return *seed_; }

 private:
  RedisConnection& Node(const std::string& host, int port);
  // exchange() on `conn`, once more on a fresh connection when the one it had was closed.
  Status OnConnection(RedisConnection& conn, const std::function<Status()>& exchange);

  RedisEndpoint seed_endpoint_;
  RedisTimeouts timeouts_;
  RedisConnection* seed_ = nullptr;
  std::map<std::string, std::unique_ptr<RedisConnection>> nodes_;  // by "host:port"
  std::array<RedisConnection*, 16384> slots_{};                    // nullptr: the seed
};

}  // namespace hearth::cache
