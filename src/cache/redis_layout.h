// RedisLayout: how RedisStore (redis_store.h, which describes the layout) names a state's
// keys and encodes its header value. Internal to src/cache/; tests use it to reach the
// keys of a state (to delete a chunk, forge a header).
//
// Thread safety: free functions on values; no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/prefix_tree.h"
#include "cache/state_file.h"

namespace hearth::cache {

// The key bases "<prefix>{<XXH3-128 of ns, kind, tokens[0, d)>}" for each d in `depths`.
// One pass over the tokens however many depths: the hash state is digested at each.
// REQUIRES: depths ascending, each in [0, tokens.size()].
std::vector<std::string> RedisStateBases(const std::string& prefix, const std::string& ns, StateKind kind,
                                         std::span<const Token> tokens, std::span<const int32_t> depths);
std::string RedisHeaderKey(const std::string& base);
std::string RedisChunkKey(const std::string& base, uint64_t payload_hash, uint32_t index);

// The most chunks a state may have (4 TiB at the default 4 MiB): a corrupt or forged header
// must not make a reader build a list of billions of keys.
inline constexpr uint32_t kMaxRedisChunks = uint32_t{1} << 20;

struct RedisHeader {
  StateHeader state;         // ns, kind, tokens, payload length and XXH3
  uint64_t chunk_bytes = 0;  // every chunk but the last holds this many payload bytes
  uint32_t n_chunks = 0;     // ceil(payload_len / chunk_bytes)
};

// The state header (EncodeStateHeader), chunk size and count, and an XXH3 over all of it.
std::string EncodeRedisHeader(const RedisHeader& h);
// False, with `*why`, unless `value` is one whole, sound header whose chunk count fits its
// payload length and chunk size, and is at most kMaxRedisChunks.
bool DecodeRedisHeader(std::string_view value, RedisHeader* h, std::string* why);

// Bytes of chunk `index` of `h`'s payload.
uint64_t RedisChunkLength(const RedisHeader& h, uint32_t index);

}  // namespace hearth::cache
