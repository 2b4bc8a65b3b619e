#include "cache/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "cache/state_file.h"

namespace hearth::cache {
namespace {

Status ErrnoStatus(const std::string& what, int err) {
  std::string m = what + ": " + std::strerror(err);
  if (err == ENOENT) return NotFound(std::move(m));
  if (err == ENOSPC || err == EDQUOT) return ResourceExhausted(std::move(m));
  return Unavailable(std::move(m));
}

class PosixReadableFile : public ReadableFile {
 public:
  PosixReadableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixReadableFile() override { ::close(fd_); }
  StatusOr<size_t> Read(std::span<uint8_t> dst) override {
    while (true) {
      const ssize_t n = ::read(fd_, dst.data(), dst.size());
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return ErrnoStatus("cannot read " + path_, errno);
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { static_cast<void>(Close()); }
  Status Append(std::span<const uint8_t> data) override {
    errno = 0;
    if (!WriteAll(fd_, data.data(), data.size())) return ErrnoStatus("cannot write " + path_, errno != 0 ? errno : EIO);
    return Status::Ok();
  }
  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoStatus("cannot flush " + path_, errno);
    return Status::Ok();
  }
  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ErrnoStatus("cannot close " + path_, errno);
    return Status::Ok();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixFileSystem : public FileSystem {
 public:
  Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return ErrnoStatus("cannot create directory " + dir, ec.value());
    if (!std::filesystem::is_directory(dir, ec)) return Unavailable("cannot create directory " + dir + ": not a directory");
    return Status::Ok();
  }
  StatusOr<std::vector<FileInfo>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("cannot list " + dir, errno);
    std::vector<FileInfo> out;
    while (const dirent* e = ::readdir(d)) {
      struct stat st {};
      const std::string path = dir + "/" + e->d_name;
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.push_back({e->d_name, static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
    }
    ::closedir(d);
    return out;
  }
  StatusOr<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open " + path, errno);
    return std::unique_ptr<ReadableFile>(new PosixReadableFile(path, fd));
  }
  StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus("cannot create " + path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("cannot rename " + from + " to " + to, errno);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("cannot remove " + path, errno);
    return Status::Ok();
  }
  Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open " + dir, errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("cannot flush " + dir, err);
    return Status::Ok();
  }
  Status Touch(const std::string& path) override {
    if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) return ErrnoStatus("cannot touch " + path, errno);
    return Status::Ok();
  }
};

}  // namespace

FileSystem& FileSystem::Posix() {
  static PosixFileSystem* fs = new PosixFileSystem();  // never destroyed: used by threads to the end
  return *fs;
}

}  // namespace hearth::cache
