// StateFile: the on-disk format of one disk-tier state (see disk_store.h), and the
// write helper DiskStore uses. Internal to src/cache/.
//
// Layout, little-endian as the machine writes it: magic "HEARTHS1", format version, kind,
// namespace, token path, payload length, payload XXH3, then an XXH3 over all of that (the
// header checksum), then the payload.
//
// Thread safety: free functions on values; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <span>
#include <string>
#include <vector>

#include "cache/prefix_tree.h"

namespace hearth::cache {

struct StateHeader {
  uint32_t version = 0;  // EncodeStateHeader writes the current one
  StateKind kind = StateKind::kPartial;
  std::string ns;
  std::vector<Token> tokens;
  uint64_t payload_len = 0;
  uint64_t payload_hash = 0;
};

// The header bytes for `h` (the current format version, whatever h.version says).
std::string EncodeStateHeader(const StateHeader& h);

// Reads and checks a header from the start of `in`. On success `*header_size` is where the
// payload starts; on failure `*why` says what is wrong (not a state file, truncated, another
// format version, checksum mismatch) and `*h` is unspecified.
bool DecodeStateHeader(std::istream& in, StateHeader* h, size_t* header_size, std::string* why);

// XXH3 of namespace, kind and tokens: the name a state's file is stored under. 64 bits, so
// two states may share one: a reader must check the header (see DiskStore::Read).
uint64_t StateKey(const std::string& ns, std::span<const Token> tokens, StateKind kind);

// Writes all `n` bytes to `fd`, retrying short writes and writes a signal interrupted
// (EINTR). False on any other error (errno says which); some bytes may have been written.
bool WriteAll(int fd, const void* data, size_t n);

}  // namespace hearth::cache
