// DiskStore: the disk tier. Each state is one file holding its namespace, token path,
// kind and bytes, so the tree can be rebuilt after a restart.
//
// Durability: a file is written to a temporary name, flushed, and renamed into place, so
// a crash at any moment never leaves a partial file under a state's name. Every file
// carries a format version, a header checksum and a payload checksum; a partial, corrupt
// or foreign file (another model's namespace) is moved to <dir>/quarantine/ and never used.
//
// Writes are asynchronous: Write accounts for the file and queues it for a writer thread
// (the engine must not wait for the disk: a 26 MB state took 120 ms to write and flush
// here); until the file is on disk, Read serves it from the queued copy. Queued bytes are
// bounded (Write waits for the writer beyond that). A crash loses the writes still queued,
// never more; the destructor finishes them.
//
// Thread safety: the public methods are called from one thread (the engine loop); the
// writer thread shares only the queue, under mu_.
//
// Invariants:
//  1. bytes() <= the budget after every Write (oldest files are removed first, and
//     reported so the caller can forget them).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
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
  ~DiskStore();  // finishes the queued writes

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

  // Queues one state for writing; returns its key. Files evicted to stay in budget are
  // listed in evicted() until the next Write. Errors: kResourceExhausted when the state
  // alone exceeds the budget. A later I/O failure is logged and the state reads back as
  // kNotFound.
  StatusOr<uint64_t> Write(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                           std::span<const uint8_t> bytes);
  const std::vector<uint64_t>& evicted() const { return evicted_; }
  // Waits until every queued write is on disk.
  void Flush();

  // Reads and verifies a state's bytes. Errors: kDataLoss (the file is quarantined),
  // kNotFound.
  StatusOr<std::vector<uint8_t>> Read(uint64_t key);
  void Remove(uint64_t key);

  size_t bytes() const { return bytes_; }
  size_t budget() const { return budget_; }
  size_t quarantined() const { return quarantined_; }
  const std::string& dir() const { return dir_; }

 private:
  struct PendingWrite {
    uint64_t key = 0;
    std::vector<uint8_t> file;   // header + payload
    size_t payload_offset = 0;
    bool removed = false;        // guarded by mu_: removed before or while being written
  };

  DiskStore(std::string dir, size_t budget, std::string ns_prefix);
  void Load();
  void WriterLoop();
  Status WriteFile(const std::string& path, const std::vector<uint8_t>& file);
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

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<PendingWrite>> queue_;                     // guarded by mu_
  std::unordered_map<uint64_t, std::shared_ptr<PendingWrite>> pending_;  // guarded by mu_: newest per key
  size_t pending_bytes_ = 0;                                            // guarded by mu_
  bool stopping_ = false;                                               // guarded by mu_
  std::thread writer_;
};

}  // namespace hearth::cache
