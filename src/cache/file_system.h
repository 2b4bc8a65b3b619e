// FileSystem: the few file operations the disk tier (disk_store.h) performs, behind an
// interface so that tests can make them fail on command (testing/faulty_file_system.h)
// and check what the cache does then. FileSystem::Posix() is the machine's own.
//
// Errors say what failed, with the system's reason: kNotFound when a path does not exist,
// kResourceExhausted when the device is full (ENOSPC, EDQUOT), kUnavailable for any
// other I/O error (EIO, EACCES, EROFS, ...).
//
// Thread safety: a FileSystem may be called from several threads at once (the engine
// thread reads while the disk tier's writer writes); one ReadableFile or WritableFile
// from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace hearth::cache {

// A file read from its start, in order.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to dst.size() bytes at the current position; returns how many, 0 at the end
  // of the file. On error the position is unspecified.
  virtual StatusOr<size_t> Read(std::span<uint8_t> dst) = 0;
};

// A new file, written from its start. Closed by the destructor when Close was not called.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // All of `data` or an error (some of it may then have been written).
  virtual Status Append(std::span<const uint8_t> data) = 0;
  // Flushes what was appended to the device.
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

class FileSystem {
 public:
  // The machine's file system (POSIX calls). Lives for the process.
  static FileSystem& Posix();

  virtual ~FileSystem() = default;

  struct FileInfo {
    std::string name;    // within the directory listed
    uint64_t bytes = 0;
    int64_t mtime_ns = 0;
  };
  // Creates `dir` and its missing parents; ok when it exists as a directory.
  virtual Status CreateDirs(const std::string& dir) = 0;
  // The regular files directly in `dir`, in no particular order.
  virtual StatusOr<std::vector<FileInfo>> List(const std::string& dir) = 0;
  virtual StatusOr<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) = 0;
  // Creates `path` (mode 0600: cache files hold conversations' tokens), truncating a file
  // already there.
  virtual StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path) = 0;
  // Atomically replaces `to` by `from`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Ok when `path` did not exist.
  virtual Status Remove(const std::string& path) = 0;
  // Makes renames and removals in `dir` durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Sets the modification time of `path` to now.
  virtual Status Touch(const std::string& path) = 0;
};

}  // namespace hearth::cache
