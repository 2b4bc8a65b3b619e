// DiskStore: the disk tier. Each state is one file holding its namespace, token path,
// kind and bytes, so the tree can be rebuilt after a restart.
//
// Durability: a file is written to a temporary name, flushed, and renamed into place, so
// a crash at any moment never leaves a partial file under a state's name. Every file
// carries a format version, a header checksum and a payload checksum (state_file.h); a
// partial, corrupt or foreign file (another model's namespace) is moved to
// <dir>/quarantine/ and never used. The quarantine is bounded (Options): the oldest
// quarantined files are deleted first, the newest is always kept for a person to examine.
//
// A state's key (its file name) is a 64-bit hash of namespace, kind and tokens, so two
// states can share one; Read checks the file against the state asked for and never serves
// another state, least of all another namespace's (another API key's conversations).
//
// Writes are asynchronous: Write accounts for the file and queues it for a writer thread
// (the engine must not wait for the disk: a 26 MB state took 120 ms to write and flush
// here); until the file is on disk, Read serves it from the queued copy. Queued bytes are
// bounded (Write waits for the writer beyond that). A crash loses the writes still queued,
// never more; the destructor finishes them.
//
// I/O errors never end the store and never serve a state: a write that fails (an I/O
// error, a full disk) leaves no file and no partial file behind, is logged, counted in
// write_errors(), and its key is listed in evicted() at the next Write so the caller can
// forget the state; a read that fails is logged, counted in read_errors() and returns
// kUnavailable, leaving the file where it is (it may read back after a restart). All
// file access goes through Options::file_system, so tests can inject those faults.
//
// Thread safety: the public methods are called from one thread (the engine loop); the
// writer thread shares only the queue, under mu_.
//
// Invariants:
//  1. bytes() <= the budget after every Write (oldest files are removed first, and
//     reported so the caller can forget them).
//  2. Read returns only bytes written for exactly the namespace, tokens and kind asked for.
//  3. quarantine/ holds at most Options::quarantine_files files, and more than
//     Options::quarantine_bytes bytes only when its newest file alone is that large.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "cache/file_system.h"
#include "cache/prefix_tree.h"

namespace hearth::cache {

class DiskStore {
 public:
  struct Options {
    size_t quarantine_files = 16;          // bad files kept in quarantine/ for a person to examine
    size_t quarantine_bytes = 256u << 20;  // and their bytes, beyond which the oldest go
    int key_bits = 64;                     // tests: fewer bits make keys collide
    FileSystem* file_system = nullptr;     // nullptr: FileSystem::Posix(); must outlive the store
  };
  // Opens (creating) `dir` and checks that a file can be written, flushed and removed
  // there. Files whose namespace does not start with `ns_prefix` are foreign and
  // quarantined. Errors: kUnavailable (kResourceExhausted when the device is full) when
  // the directory cannot be created, listed or written: the caller runs without a disk
  // tier.
  static StatusOr<std::unique_ptr<DiskStore>> Open(const std::string& dir, size_t budget_bytes,
                                                   const std::string& ns_prefix, Options options);
  static StatusOr<std::unique_ptr<DiskStore>> Open(const std::string& dir, size_t budget_bytes,
                                                   const std::string& ns_prefix) {
    return Open(dir, budget_bytes, ns_prefix, Options{});
  }
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

  // Queues one state for writing; returns its key. Files evicted to stay in budget, and
  // those whose write failed since the last Write, are listed in evicted() until the next
  // Write. Errors: kResourceExhausted when the state alone exceeds the budget. A later
  // I/O failure is logged and the state reads back as kNotFound.
  StatusOr<uint64_t> Write(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                           std::span<const uint8_t> bytes);
  const std::vector<uint64_t>& evicted() const { return evicted_; }
  // Waits until every queued write is on disk.
  void Flush();

  // Reads and verifies the bytes of the state Write returned `key` for (or Scan listed it
  // under): `ns`, `tokens` and `kind` are that state's, and the file's header (or the
  // queued copy) must match all three. Errors: kNotFound when there is no such file, or
  // when it holds another state (two states' keys collided: logged, counted in
  // mismatched(), the file left to the state it belongs to); kDataLoss when the file is
  // corrupt (it is quarantined); kUnavailable when reading failed (an I/O error: the file
  // stays). Either way nothing is returned and the key is forgotten here when its file is
  // gone or bad.
  StatusOr<std::vector<uint8_t>> Read(uint64_t key, const std::string& ns, std::span<const Token> tokens,
                                      StateKind kind);
  void Remove(uint64_t key);

  size_t bytes() const { return bytes_; }
  size_t budget() const { return budget_; }
  size_t quarantined() const { return quarantined_; }  // files moved to quarantine/ since Open
  size_t mismatched() const { return mismatched_; }    // Reads refused: the file held another state
  size_t read_errors() const { return read_errors_; }  // Reads (and files at Open) that failed with an I/O error
  size_t write_errors() const;                          // writes that failed (I/O error, full disk)
  const std::string& dir() const { return dir_; }

 private:
  struct PendingWrite {
    uint64_t key = 0;
    std::string ns;              // what the file holds, for Read to check
    std::vector<Token> tokens;
    StateKind kind = StateKind::kPartial;
    std::vector<uint8_t> file;   // header + payload
    size_t payload_offset = 0;
    int64_t generation = 0;      // FileInfo::generation of the write
    bool removed = false;        // guarded by mu_: removed before or while being written
  };

  DiskStore(std::string dir, size_t budget, std::string ns_prefix, Options options);
  Status ProbeWritable();
  void Load();
  std::optional<Entry> LoadFile(const FileSystem::FileInfo& fi);
  void WriterLoop();
  Status WriteFile(const std::string& path, const std::vector<uint8_t>& file);
  // Forgets the files whose write failed (listing them in evicted_).
  void ForgetFailedWrites();
  void Quarantine(const std::string& path, const std::string& why);
  // Deletes the oldest quarantined files until invariant 3 holds.
  void PruneQuarantine();
  uint64_t KeyOf(const std::string& ns, std::span<const Token> tokens, StateKind kind) const;
  std::string PathOf(uint64_t key) const;

  FileSystem& file_system_;
  std::string dir_;
  size_t budget_;
  std::string ns_prefix_;
  Options options_;
  std::vector<Entry> found_;
  std::vector<uint64_t> evicted_;
  struct FileInfo {
    size_t bytes = 0;
    int64_t written = 0;     // write (or read) order, for eviction
    int64_t generation = 0;  // which Write made it, to match a failed write to it
  };
  std::vector<std::pair<uint64_t, FileInfo>> files_;
  int64_t clock_ = 0;
  size_t bytes_ = 0;
  size_t quarantined_ = 0;
  size_t mismatched_ = 0;
  size_t read_errors_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<PendingWrite>> queue_;                     // guarded by mu_
  std::unordered_map<uint64_t, std::shared_ptr<PendingWrite>> pending_;  // guarded by mu_: newest per key
  size_t pending_bytes_ = 0;                                            // guarded by mu_
  std::vector<std::pair<uint64_t, int64_t>> failed_;                    // guarded by mu_: (key, generation)
  size_t write_errors_ = 0;                                             // guarded by mu_
  bool stopping_ = false;                                               // guarded by mu_
  std::thread writer_;
};

}  // namespace hearth::cache
