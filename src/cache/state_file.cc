#include "cache/state_file.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hearth::cache {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'S', '1'};
constexpr uint32_t kFormatVersion = 1;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

std::string EncodeStateHeader(const StateHeader& h) {
  std::string out(kMagic, sizeof(kMagic));
  Put(&out, kFormatVersion);
  Put(&out, static_cast<uint32_t>(h.kind));
  Put(&out, static_cast<uint32_t>(h.ns.size()));
  out += h.ns;
  Put(&out, static_cast<uint32_t>(h.tokens.size()));
  out.append(reinterpret_cast<const char*>(h.tokens.data()), h.tokens.size() * sizeof(Token));
  Put(&out, h.payload_len);
  Put(&out, h.payload_hash);
  Put(&out, static_cast<uint64_t>(XXH3_64bits(out.data(), out.size())));
  return out;
}

bool DecodeStateHeader(std::istream& in, StateHeader* h, size_t* header_size, std::string* why) {
  std::string raw(sizeof(kMagic), '\0');
  auto get = [&](void* dst, size_t n) {
    if (n == 0) return true;  // dst may be an empty vector's null data(): memcpy must not see it
    std::string tmp(n, '\0');
    if (!in.read(tmp.data(), static_cast<std::streamsize>(n))) return false;
    std::memcpy(dst, tmp.data(), n);
    raw += tmp;
    return true;
  };
  if (!in.read(raw.data(), sizeof(kMagic)) || std::memcmp(raw.data(), kMagic, sizeof(kMagic)) != 0) {
    *why = "not a hearth state file";
    return false;
  }
  uint32_t kind = 0, ns_len = 0, n_tokens = 0;
  if (!get(&h->version, 4) || !get(&kind, 4) || !get(&ns_len, 4) || ns_len > (1u << 16)) {
    *why = "truncated header";
    return false;
  }
  if (h->version != kFormatVersion) {
    *why = "format version " + std::to_string(h->version);
    return false;
  }
  h->ns.resize(ns_len);
  if (!get(h->ns.data(), ns_len) || !get(&n_tokens, 4) || n_tokens > (1u << 24)) {
    *why = "truncated header";
    return false;
  }
  // The tokens grow as the file gives them: a corrupt count costs what the file holds,
  // not an allocation of the size it claims.
  auto get_tokens = [&](uint32_t count) {
    constexpr size_t kPiece = size_t{1} << 14;
    h->tokens.clear();
    while (h->tokens.size() < count) {
      const size_t at = h->tokens.size();
      h->tokens.resize(at + std::min<size_t>(kPiece, count - at));
      if (!get(h->tokens.data() + at, (h->tokens.size() - at) * sizeof(Token))) return false;
    }
    return true;
  };
  uint64_t stored_hash = 0;
  if (!get_tokens(n_tokens) || !get(&h->payload_len, 8) || !get(&h->payload_hash, 8)) {
    *why = "truncated header";
    return false;
  }
  const uint64_t computed = XXH3_64bits(raw.data(), raw.size());
  if (!in.read(reinterpret_cast<char*>(&stored_hash), 8) || stored_hash != computed) {
    *why = "header checksum mismatch";
    return false;
  }
  if (kind > static_cast<uint32_t>(StateKind::kPartial)) {
    *why = "unknown state kind";
    return false;
  }
  h->kind = static_cast<StateKind>(kind);
  *header_size = raw.size() + 8;
  return true;
}

uint64_t StateKey(const std::string& ns, std::span<const Token> tokens, StateKind kind) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, ns.data(), ns.size());
  const auto k = static_cast<uint32_t>(kind);
  XXH3_64bits_update(st, &k, sizeof(k));
  XXH3_64bits_update(st, tokens.data(), tokens.size() * sizeof(Token));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;  // a signal arrived before anything was written
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace hearth::cache
