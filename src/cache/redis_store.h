// RedisStore: the shared tier (shared_store.h) on Redis, through hiredis. Several hearth
// processes pointed at one Redis find each other's states.
//
// Layout. A state of `kind` holding exactly `tokens` in namespace `ns` lives under
//   <prefix>{<h>}:h        its header: the disk tier's header (state_file.h: namespace,
//                          kind, tokens, payload length, payload XXH3, header checksum),
//                          then chunk size, chunk count and a checksum over all of it
//   <prefix>{<h>}:<p>:<i>  chunk i of the payload, i in [0, count), <p> the payload XXH3
// where <h> is an XXH3-128 of namespace, kind and tokens (32 hex digits). The braces are a
// Redis Cluster hash tag: a state's keys share one slot. Chunks are named by the payload's
// checksum too, so a state written again with other bytes never mixes old and new chunks
// under one header.
//
// Writes: chunks first, header last, so a header means its chunks were written (Redis
// may evict any of them since). Keys have no TTL: Redis evicts. REQUIRES of the operator:
// a maxmemory and an LRU or LFU maxmemory-policy (allkeys-lru); with `noeviction` a full
// Redis refuses writes (counted as write errors, states dropped), with a volatile-*
// policy nothing hearth writes is evictable.
//
// Trust: a state is returned only when its header decodes, names exactly the namespace,
// kind and tokens asked for (the hash is never trusted alone), every chunk is there with
// its expected length, and the payload's XXH3 matches. Anything else is a miss with `why`,
// and the next deepest candidate with a header is tried. A Redis that is down or slow is
// a miss ("store unavailable: ..."), bounded by the timeouts; reconnects back off.
//
// Redis Cluster: the URL names any one node; MOVED replies teach the store which node
// serves which slot, and ASK (a slot being migrated) is followed per command
// (redis_router.h). A state's keys share one slot, so a state is read and written on one
// node; a lookup asks each node for the headers it holds in one pipeline.
//
// Not supported: TLS (`rediss://`: hiredis 0.14 has none; Open says so).
//
// Thread safety: every method may be called from any thread. Finds share one set of
// connections (under a lock); the writer thread owns another.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "cache/shared_store.h"

namespace hearth::cache {

struct RedisOptions {
  std::string url;                          // redis://[user:password@]host:port[/db] or unix:///path
  int connect_timeout_ms = 500;             // per connect attempt
  int command_timeout_ms = 2000;            // per send or receive on the socket
  int reconnect_min_ms = 100;               // backoff after a failed connect, doubling
  int reconnect_max_ms = 5000;              // up to this
  size_t chunk_bytes = 4u << 20;            // payload bytes per chunk key
  size_t queue_bytes = 256u << 20;          // queued for the writer; past it the oldest is dropped
  int shutdown_ms = 2000;                   // the destructor writes what is queued for this long
  std::string key_prefix = "hearth:";      // REQUIRES: no '{' or '}' (the hash tag follows it)
};

// A store on the Redis at options.url. Succeeds when Redis is down (logged: lookups miss
// and writes drop until it answers). Sets SIGPIPE to be ignored in the process when it has
// its default action (which would end the process when Redis closes a connection mid-write). Errors: kInvalidArgument for a malformed URL or bad
// options, kUnimplemented for `rediss://`.
StatusOr<std::unique_ptr<SharedStore>> OpenRedisStore(const RedisOptions& options);

}  // namespace hearth::cache
