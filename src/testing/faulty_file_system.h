// FaultyFileSystem (tests only): a cache::FileSystem over another (the machine's by
// default) that fails on command, for the disk tier's fault-injection tests.
//
// Each armed fault fires on the next `times` operations it applies to, then disarms:
//   kReadError  a state file's first Read fails (EIO), as a bad sector would;
//   kSlowRead   opening a state file for reading takes `slow_read` first;
//   kWriteError a created file takes half of what is appended, then fails (EIO);
//   kDiskFull   the same with ENOSPC (also the start-up probe: arm before Open to
//               simulate a full disk at start);
//   kTruncate   a state file renamed into place loses its second half at once, as if
//               the disk lost it between write and read;
//   kFlipBit    a state file renamed into place has one bit of its last byte (payload)
//               flipped;
//   kUnreadableDir listing a directory fails (EACCES), as chmod 0 does for all but root.
// Write faults apply to every created file, read faults and corruption to state files
// (names ending in ".state", outside quarantine/).
//
// Thread safety: any thread (the disk tier's writer calls it too).
#pragma once

#include <climits>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "cache/file_system.h"

namespace hearth::testing {

enum class FileFault { kReadError, kSlowRead, kWriteError, kDiskFull, kTruncate, kFlipBit, kUnreadableDir };

inline const char* FileFaultName(FileFault f) {
  switch (f) {
    case FileFault::kReadError: return "read error";
    case FileFault::kSlowRead: return "slow read";
    case FileFault::kWriteError: return "write error";
    case FileFault::kDiskFull: return "disk full";
    case FileFault::kTruncate: return "truncated";
    case FileFault::kFlipBit: return "bit flipped";
    case FileFault::kUnreadableDir: return "unreadable directory";
  }
  return "?";
}

class FaultyFileSystem : public cache::FileSystem {
 public:
  static constexpr int kAlways = INT_MAX;

  // `base` must outlive this.
  explicit FaultyFileSystem(cache::FileSystem& base = cache::FileSystem::Posix()) : base_(base) {}

  void Inject(FileFault fault, int times = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    armed_[fault] = times;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_.clear();
  }
  // How many times `fault` fired.
  int fired(FileFault fault) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fired_.find(fault);
    return it == fired_.end() ? 0 : it->second;
  }
  std::chrono::milliseconds slow_read{300};

  Status CreateDirs(const std::string& dir) override { return base_.CreateDirs(dir); }
  StatusOr<std::vector<FileInfo>> List(const std::string& dir) override {
    if (Fire(FileFault::kUnreadableDir)) return Unavailable("cannot list " + dir + ": Permission denied (injected)");
    return base_.List(dir);
  }
  StatusOr<std::unique_ptr<cache::ReadableFile>> OpenForRead(const std::string& path) override {
    auto file = base_.OpenForRead(path);
    if (!file.ok() || !IsStateFile(path)) return file;
    if (Fire(FileFault::kSlowRead)) std::this_thread::sleep_for(slow_read);
    if (Fire(FileFault::kReadError)) return std::unique_ptr<cache::ReadableFile>(new FailingReader(path));
    return file;
  }
  StatusOr<std::unique_ptr<cache::WritableFile>> Create(const std::string& path) override {
    auto file = base_.Create(path);
    if (!file.ok()) return file;
    if (Fire(FileFault::kDiskFull)) {
      return std::unique_ptr<cache::WritableFile>(new FailingWriter(std::move(*file), path, /*full=*/true));
    }
    if (Fire(FileFault::kWriteError)) {
      return std::unique_ptr<cache::WritableFile>(new FailingWriter(std::move(*file), path, /*full=*/false));
    }
    return file;
  }
  Status Rename(const std::string& from, const std::string& to) override {
    HEARTH_RETURN_IF_ERROR(base_.Rename(from, to));
    if (!IsStateFile(to)) return Status::Ok();
    for (FileFault f : {FileFault::kTruncate, FileFault::kFlipBit}) {
      if (Fire(f)) Damage(to, f);
    }
    return Status::Ok();
  }
  // Does to the file at `path` what kTruncate or kFlipBit does at a rename; tests call it
  // to damage one chosen file at a chosen moment.
  static void Damage(const std::string& path, FileFault fault) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size == 0) return;
    if (fault == FileFault::kTruncate) std::filesystem::resize_file(path, size / 2, ec);
    if (fault == FileFault::kFlipBit) {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(size - 1));
      const char c = static_cast<char>(f.get() ^ 0x10);
      f.seekp(static_cast<std::streamoff>(size - 1));
      f.put(c);
    }
  }
  Status Remove(const std::string& path) override { return base_.Remove(path); }
  Status SyncDir(const std::string& dir) override { return base_.SyncDir(dir); }
  Status Touch(const std::string& path) override { return base_.Touch(path); }

 private:
  class FailingReader : public cache::ReadableFile {
   public:
    explicit FailingReader(std::string path) : path_(std::move(path)) {}
    StatusOr<size_t> Read(std::span<uint8_t>) override {
      return Unavailable("cannot read " + path_ + ": Input/output error (injected)");
    }

   private:
    std::string path_;
  };
  class FailingWriter : public cache::WritableFile {
   public:
    FailingWriter(std::unique_ptr<cache::WritableFile> base, std::string path, bool full)
        : base_(std::move(base)), path_(std::move(path)), full_(full) {}
    Status Append(std::span<const uint8_t> data) override {
      HEARTH_RETURN_IF_ERROR(base_->Append(data.subspan(0, data.size() / 2)));
      if (full_) return ResourceExhausted("cannot write " + path_ + ": No space left on device (injected)");
      return Unavailable("cannot write " + path_ + ": Input/output error (injected)");
    }
    Status Sync() override { return base_->Sync(); }
    Status Close() override { return base_->Close(); }

   private:
    std::unique_ptr<cache::WritableFile> base_;
    std::string path_;
    bool full_;
  };

  static bool IsStateFile(const std::string& path) {
    return path.ends_with(".state") && path.find("/quarantine/") == std::string::npos;
  }
  bool Fire(FileFault fault) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = armed_.find(fault);
    if (it == armed_.end() || it->second <= 0) return false;
    if (it->second != kAlways) --it->second;
    ++fired_[fault];
    return true;
  }

  cache::FileSystem& base_;
  mutable std::mutex mu_;
  std::map<FileFault, int> armed_;  // guarded by mu_: how many more times each fires
  std::map<FileFault, int> fired_;  // guarded by mu_
};

}  // namespace hearth::testing
