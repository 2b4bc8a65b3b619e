#include "cache/redis_layout.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <sstream>

namespace hearth::cache {
namespace {

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr size_t kTrailer = sizeof(uint64_t) + sizeof(uint32_t) + sizeof(uint64_t);

}  // namespace

std::vector<std::string> RedisStateBases(const std::string& prefix, const std::string& ns, StateKind kind,
                                         std::span<const Token> tokens, std::span<const int32_t> depths) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  // The namespace's length first, so that no namespace's bytes read as another's tokens.
  const auto ns_len = static_cast<uint32_t>(ns.size());
  XXH3_128bits_update(st, &ns_len, sizeof(ns_len));
  XXH3_128bits_update(st, ns.data(), ns.size());
  const auto k = static_cast<uint32_t>(kind);
  XXH3_128bits_update(st, &k, sizeof(k));
  std::vector<std::string> out;
  size_t hashed = 0;
  for (int32_t d : depths) {
    const auto upto = static_cast<size_t>(d);
    XXH3_128bits_update(st, tokens.data() + hashed, (upto - hashed) * sizeof(Token));
    hashed = upto;
    const XXH128_hash_t h = XXH3_128bits_digest(st);  // leaves the state as it was
    char hex[33];
    std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    out.push_back(prefix + "{" + hex + "}");
  }
  XXH3_freeState(st);
  return out;
}

std::string RedisHeaderKey(const std::string& base) { return base + ":h"; }

std::string RedisChunkKey(const std::string& base, uint64_t payload_hash, uint32_t index) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(payload_hash));
  return base + ":" + hex + ":" + std::to_string(index);
}

std::string EncodeRedisHeader(const RedisHeader& h) {
  std::string out = EncodeStateHeader(h.state);
  Append(&out, h.chunk_bytes);
  Append(&out, h.n_chunks);
  Append(&out, static_cast<uint64_t>(XXH3_64bits(out.data(), out.size())));
  return out;
}

bool DecodeRedisHeader(std::string_view value, RedisHeader* h, std::string* why) {
  std::istringstream in{std::string(value)};
  size_t state_size = 0;
  if (!DecodeStateHeader(in, &h->state, &state_size, why)) return false;
  if (value.size() != state_size + kTrailer) {
    *why = "header of " + std::to_string(value.size()) + " bytes, expected " + std::to_string(state_size + kTrailer);
    return false;
  }
  const char* t = value.data() + state_size;
  h->chunk_bytes = Load<uint64_t>(t);
  h->n_chunks = Load<uint32_t>(t + 8);
  if (Load<uint64_t>(t + 12) != XXH3_64bits(value.data(), state_size + 12)) {
    *why = "header checksum mismatch";
    return false;
  }
  const uint64_t len = h->state.payload_len;
  const uint64_t want = h->chunk_bytes == 0 ? 0 : len / h->chunk_bytes + (len % h->chunk_bytes != 0 ? 1 : 0);
  if ((h->chunk_bytes == 0 && len != 0) || want != h->n_chunks || h->n_chunks > kMaxRedisChunks) {
    *why = "header's chunk layout does not fit its payload length";
    return false;
  }
  return true;
}

uint64_t RedisChunkLength(const RedisHeader& h, uint32_t index) {
  const uint64_t start = uint64_t{index} * h.chunk_bytes;
  const uint64_t left = h.state.payload_len > start ? h.state.payload_len - start : 0;
  return left < h.chunk_bytes ? left : h.chunk_bytes;
}

}  // namespace hearth::cache
