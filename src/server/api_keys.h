// API keys: where `hearth serve` takes them from (--api-key, --api-key-file,
// HEARTH_API_KEY) and the cache namespace each key's requests live in.
//
// A key's namespace is a keyed hash of the key, HMAC-SHA256 (OpenSSL's libcrypto) under a
// namespace secret. It depends on the key and the secret alone: not on the order keys are
// given in, nor on which other keys are configured, so reordering, adding or removing keys
// at a restart never hands one client's disk states to another. And it does not reveal the
// key: disk files carry their namespace in the clear (disk_store.h), and a hash of the key
// without a secret could be checked against guesses offline.
//
// The secret lives in the cache directory, <cache-dir>/namespace-secret (64 hex digits,
// mode 0600, created once), so namespaces are stable across restarts over that directory;
// deleting it makes every key's disk states unreachable (they age out of the budget).
// Without a cache directory nothing outlives the process and a random secret serves.
//
// Thread safety: free functions; ApiKey values are immutable once the server starts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hearth::server {

struct ApiKey {
  std::string key;              // what a client sends (Bearer or x-api-key)
  std::string cache_namespace;  // "key-" + hex HMAC-SHA256(secret, key): its requests' namespace
};

// The keys from the three sources, in this order, duplicates dropped; empty when none
// gives any (no authentication).
//  - `from_flags`: --api-key values, taken as they are.
//  - `file` (--api-key-file; empty: none): one key per line, surrounding whitespace
//    trimmed, blank lines and lines starting with '#' ignored. It must not be readable by
//    group or others (argv is visible to every local user; a key file should not be).
//  - `env` (HEARTH_API_KEY; nullopt or empty: unset): keys separated by commas, each
//    trimmed.
// Errors: kInvalidArgument, naming the source, for an empty key or one holding whitespace
// or control characters, a file that cannot be read, is readable by group or others, or
// holds no key, and a HEARTH_API_KEY holding no key.
StatusOr<std::vector<std::string>> CollectApiKeys(const std::vector<std::string>& from_flags, const std::string& file,
                                                  std::optional<std::string_view> env);

// The namespace secret of `cache_dir` (created with it when missing), or a fresh random
// one when `cache_dir` is empty. Warns on stderr when the file can be read by group or
// others. Errors: kUnavailable when the directory or file cannot be created or read;
// kDataLoss when the file does not hold 64 hex digits (delete it to start over).
StatusOr<std::string> LoadNamespaceSecret(const std::string& cache_dir);

// Each key with its namespace under `secret`. REQUIRES: !secret.empty().
std::vector<ApiKey> MakeApiKeys(const std::vector<std::string>& keys, const std::string& secret);

}  // namespace hearth::server
