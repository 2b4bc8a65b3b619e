// DiskStore: the disk tier. Each state is one file holding its namespace, token path,
// kind and bytes, so the tree can be rebuilt after a restart.
//
// Durability: a file is written to a temporary name, flushed, and renamed into place, so
// a crash at any moment loses at most the write in progress. Every file carries a
// format version, a header checksum and a payload checksum; a partial, corrupt or
// foreign file (another model's namespace) is moved to <dir>/quarantine/ and never used.
//
// Thread safety: none; owned by the engine loop thread.
//
// Invariants:
//  1. bytes() <= the budget after every Write (oldest files are removed first, and
//     reported so the caller can forget them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/prefix_tree.h"

namespace hearth::cache {

class DiskStore {
 public:
  // Opens (creating) `dir`. Files whose namespace does not start with `ns_prefix` are
  // foreign and quarantined. Errors: kUnavailable when the directory cannot be created.
  static StatusOr<std::unique_ptr<DiskStore>> Open(const std::string& dir, size_t budget_bytes,
                                                   const std::string& ns_prefix);

  struct Entry {
    uint64_t key = 0;
    std::string ns;
    std::vector<Token> tokens;
    StateKind kind = StateKind::kPartial;
    size_t bytes = 0;
  };
  // Valid entries found when the store was opened (stale temporaries removed, bad files
  // quarantined).
  const std::vector<Entry>& Scan() const { return found_; }

  // Writes one state; returns its key. Files evicted to stay in budget are listed in
  // evicted() until the next Write. Errors: kUnavailable on I/O failure (nothing left
  // behind), kResourceExhausted when the state alone exceeds the budget.
  StatusOr<uint64_t> Write(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                           std::span<const uint8_t> bytes);
  const std::vector<uint64_t>& evicted() const { return evicted_; }

  // Reads and verifies a state's bytes. Errors: kDataLoss (the file is quarantined),
  // kNotFound.
  StatusOr<std::vector<uint8_t>> Read(uint64_t key);
  void Remove(uint64_t key);

  size_t bytes() const { return bytes_; }
  size_t quarantined() const { return quarantined_; }
  const std::string& dir() const { return dir_; }

 private:
  DiskStore(std::string dir, size_t budget, std::string ns_prefix);
  void Load();
  void Quarantine(const std::string& path, const std::string& why);
  std::string PathOf(uint64_t key) const;

  std::string dir_;
  size_t budget_;
  std::string ns_prefix_;
  std::vector<Entry> found_;
  std::vector<uint64_t> evicted_;
  struct FileInfo {
    size_t bytes = 0;
    int64_t written = 0;  // write order, for eviction
  };
  std::vector<std::pair<uint64_t, FileInfo>> files_;
  int64_t clock_ = 0;
  size_t bytes_ = 0;
  size_t quarantined_ = 0;
};

}  // namespace hearth::cache
