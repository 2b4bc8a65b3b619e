#include "cache/disk_store.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <istream>
#include <tuple>

#include "cache/state_file.h"

namespace hearth::cache {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSuffix = ".state";
constexpr size_t kMaxPendingBytes = 64u << 20;  // queued for the writer before Write waits (counts against resident memory)

// An istream's buffer over a ReadableFile that keeps the file's first error, so that a
// reader can tell a failed read (the file may be sound) from a short or corrupt file.
class FileBuf : public std::streambuf {
 public:
  explicit FileBuf(ReadableFile& file) : file_(file) {}
  const Status& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!error_.ok()) return traits_type::eof();
    auto n = file_.Read(std::span(reinterpret_cast<uint8_t*>(buf_), sizeof(buf_)));
    if (!n.ok()) error_ = n.status();
    if (!n.ok() || *n == 0) return traits_type::eof();
    setg(buf_, buf_, buf_ + *n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  ReadableFile& file_;
  Status error_;
  char buf_[1 << 16];
};

bool SameState(const std::string& ns, std::span<const Token> tokens, StateKind kind, const std::string& want_ns,
               std::span<const Token> want_tokens, StateKind want_kind) {
  return kind == want_kind && ns == want_ns && std::equal(tokens.begin(), tokens.end(), want_tokens.begin(), want_tokens.end());
}

}  // namespace

StatusOr<std::unique_ptr<DiskStore>> DiskStore::Open(const std::string& dir, size_t budget_bytes,
                                                     const std::string& ns_prefix, Options options) {
  FileSystem& files = options.file_system != nullptr ? *options.file_system : FileSystem::Posix();
  if (Status s = files.CreateDirs((fs::path(dir) / "quarantine").string()); !s.ok()) {
    return Status(s.code() == StatusCode::kResourceExhausted ? s.code() : StatusCode::kUnavailable,
                  "cannot use cache directory " + dir + ": " + s.message());
  }
  auto store = std::unique_ptr<DiskStore>(new DiskStore(dir, budget_bytes, ns_prefix, options));
  HEARTH_RETURN_IF_ERROR(store->ProbeWritable());
  store->Load();
  return store;
}

DiskStore::DiskStore(std::string dir, size_t budget, std::string ns_prefix, Options options)
    : file_system_(options.file_system != nullptr ? *options.file_system : FileSystem::Posix()),
      dir_(std::move(dir)),
      budget_(budget),
      ns_prefix_(std::move(ns_prefix)),
      options_(options),
      writer_([this] { WriterLoop(); }) {}

DiskStore::~DiskStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

// A directory that cannot take a file (read-only, full, not ours to write) would fail
// every state written to it: the caller is better told now and runs without the tier.
// The probe's name holds ".tmp", which Load removes should a crash leave it.
Status DiskStore::ProbeWritable() {
  const std::string probe = (fs::path(dir_) / ("write-probe.tmp." + std::to_string(::getpid()))).string();
  auto fail = [&](const Status& s) {
    static_cast<void>(file_system_.Remove(probe));
    return Status(s.code() == StatusCode::kResourceExhausted ? s.code() : StatusCode::kUnavailable,
                  "cannot use cache directory " + dir_ + ": " + s.message());
  };
  if (auto listed = file_system_.List(dir_); !listed.ok()) return fail(listed.status());
  auto file = file_system_.Create(probe);
  if (!file.ok()) return fail(file.status());
  const uint8_t byte[1] = {0};
  Status s = (*file)->Append(byte);
  if (s.ok()) s = (*file)->Sync();
  if (Status c = (*file)->Close(); s.ok()) s = c;
  if (s.ok()) s = file_system_.Remove(probe);
  return s.ok() ? s : fail(s);
}

size_t DiskStore::write_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return write_errors_;
}

void DiskStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return pending_bytes_ == 0; });
}

// Writes queued files in order until stopped and the queue is empty.
void DiskStore::WriterLoop() {
  while (true) {
    std::shared_ptr<PendingWrite> w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      w = queue_.front();
      queue_.pop_front();
      if (w->removed) {
        pending_bytes_ -= w->file.size();
        cv_.notify_all();
        continue;
      }
    }
    const std::string path = PathOf(w->key);
    // Nothing may end the writer (an exception here would end the process): a write that
    // throws failed like one the disk refused.
    Status written = Status::Ok();
    try {
      written = WriteFile(path, w->file);
    } catch (const std::exception& e) {
      written = Unavailable("cannot write " + path + ": " + e.what());
    }
    if (!written.ok()) std::fprintf(stderr, "hearth: disk tier: %s; the state is dropped\n", written.message().c_str());
    std::lock_guard<std::mutex> lock(mu_);
    if (!written.ok()) {
      ++write_errors_;
      if (!w->removed) failed_.emplace_back(w->key, w->generation);
    }
    if (w->removed && written.ok()) static_cast<void>(file_system_.Remove(path));
    auto it = pending_.find(w->key);
    if (it != pending_.end() && it->second == w) pending_.erase(it);
    pending_bytes_ -= w->file.size();
    cv_.notify_all();
  }
}

// Temporary name, flush, rename: a crash never leaves a partial file under `path`, and a
// failure removes the temporary.
Status DiskStore::WriteFile(const std::string& path, const std::vector<uint8_t>& file) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto out = file_system_.Create(tmp);  // mode 0600: the header holds the conversation's tokens
  if (!out.ok()) return out.status();
  Status s = (*out)->Append(file);
  if (s.ok()) s = (*out)->Sync();
  if (Status c = (*out)->Close(); s.ok()) s = c;
  if (s.ok()) s = file_system_.Rename(tmp, path);
  if (!s.ok()) {
    static_cast<void>(file_system_.Remove(tmp));
    return s;
  }
  static_cast<void>(file_system_.SyncDir(dir_));  // the rename's durability; the file is whole either way
  return Status::Ok();
}

void DiskStore::ForgetFailedWrites() {
  std::vector<std::pair<uint64_t, int64_t>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(failed_);
  }
  for (const auto& write : failed) {
    const uint64_t key = write.first;
    const int64_t generation = write.second;
    auto it = std::find_if(files_.begin(), files_.end(),
                           [&](const auto& f) { return f.first == key && f.second.generation == generation; });
    if (it == files_.end()) continue;  // removed, or written again since
    bytes_ -= it->second.bytes;
    files_.erase(it);
    evicted_.push_back(key);
  }
}

uint64_t DiskStore::KeyOf(const std::string& ns, std::span<const Token> tokens, StateKind kind) const {
  const uint64_t key = StateKey(ns, tokens, kind);
  return options_.key_bits >= 64 ? key : key & ((uint64_t{1} << options_.key_bits) - 1);
}

std::string DiskStore::PathOf(uint64_t key) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key));
  return (fs::path(dir_) / (std::string(name) + kSuffix)).string();
}

void DiskStore::Quarantine(const std::string& path, const std::string& why) {
  const std::string to = (fs::path(dir_) / "quarantine" / fs::path(path).filename()).string();
  if (file_system_.Rename(path, to).ok()) {
    static_cast<void>(file_system_.Touch(to));  // its age in quarantine, for pruning
  } else {
    static_cast<void>(file_system_.Remove(path));
  }
  ++quarantined_;
  std::fprintf(stderr, "hearth: cache file %s quarantined: %s\n", path.c_str(), why.c_str());
  PruneQuarantine();
}

void DiskStore::PruneQuarantine() {
  const std::string qdir = (fs::path(dir_) / "quarantine").string();
  auto listed = file_system_.List(qdir);
  if (!listed.ok()) return;
  std::vector<FileSystem::FileInfo>& bad = *listed;
  // Newest first: keep a prefix within both bounds, and always the newest.
  std::sort(bad.begin(), bad.end(), [](const auto& a, const auto& b) {
    return std::tie(b.mtime_ns, b.name) < std::tie(a.mtime_ns, a.name);
  });
  size_t kept_bytes = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    kept_bytes += static_cast<size_t>(bad[i].bytes);
    if (i == 0 || (i < options_.quarantine_files && kept_bytes <= options_.quarantine_bytes)) continue;
    static_cast<void>(file_system_.Remove((fs::path(qdir) / bad[i].name).string()));
  }
}

// Checks one file of the directory at start-up: its entry when it is a usable state;
// else nullopt, having removed it (an interrupted write), quarantined it (proven bad) or
// left it for a later start (unreadable now).
std::optional<DiskStore::Entry> DiskStore::LoadFile(const FileSystem::FileInfo& fi) {
  const std::string path = (fs::path(dir_) / fi.name).string();
  const std::string& name = fi.name;
  if (name.find(".tmp") != std::string::npos) {  // a write interrupted by a crash
    static_cast<void>(file_system_.Remove(path));
    return std::nullopt;
  }
  if (!name.ends_with(kSuffix)) return std::nullopt;
  auto file = file_system_.OpenForRead(path);
  if (!file.ok()) {  // not proven bad: it stays for a later start
    ++read_errors_;
    std::fprintf(stderr, "hearth: disk tier: %s; not used\n", file.status().message().c_str());
    return std::nullopt;
  }
  FileBuf buf(**file);
  std::istream in(&buf);
  StateHeader h;
  size_t header_size = 0;
  std::string why;
  const bool decoded = DecodeStateHeader(in, &h, &header_size, &why);
  if (!buf.error().ok()) {
    ++read_errors_;
    std::fprintf(stderr, "hearth: disk tier: %s; not used\n", buf.error().message().c_str());
    return std::nullopt;
  }
  const auto size = static_cast<size_t>(fi.bytes);
  // Undecodable: `why` says so already.
  if (decoded && !h.ns.starts_with(ns_prefix_)) {
    why = "belongs to another model or context configuration";
  } else if (decoded && size != header_size + h.payload_len) {
    why = "size " + std::to_string(size) + " != " + std::to_string(header_size + h.payload_len);
  } else if (decoded) {
    Entry e;
    e.ns = h.ns;
    e.tokens = std::move(h.tokens);
    e.kind = h.kind;
    e.bytes = size;
    e.key = KeyOf(e.ns, e.tokens, e.kind);
    if (PathOf(e.key) == path) return e;
    why = "file name does not match its content";
  }
  Quarantine(path, why);
  return std::nullopt;
}

void DiskStore::Load() {
  std::vector<std::pair<int64_t, Entry>> found;
  auto listed = file_system_.List(dir_);
  if (!listed.ok()) std::fprintf(stderr, "hearth: disk tier: %s\n", listed.status().message().c_str());
  for (const FileSystem::FileInfo& fi : listed.ok() ? *listed : std::vector<FileSystem::FileInfo>{}) {
    if (std::optional<Entry> e = LoadFile(fi)) found.emplace_back(fi.mtime_ns, std::move(*e));
  }
  PruneQuarantine();  // also what an earlier run left there
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [t, e] : found) {
    ++clock_;
    files_.push_back({e.key, {e.bytes, clock_, clock_}});
    bytes_ += e.bytes;
    found_.push_back(std::move(e));
  }
}

StatusOr<uint64_t> DiskStore::Write(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                                    std::span<const uint8_t> bytes) {
  evicted_.clear();
  ForgetFailedWrites();
  StateHeader h;
  h.kind = kind;
  h.ns = ns;
  h.tokens.assign(tokens.begin(), tokens.end());
  h.payload_len = bytes.size();
  h.payload_hash = XXH3_64bits(bytes.data(), bytes.size());
  const std::string header = EncodeStateHeader(h);
  const size_t total = header.size() + bytes.size();
  if (total > budget_) return ResourceExhausted("state of " + std::to_string(total) + " bytes exceeds --cache-disk");
  const uint64_t key = KeyOf(ns, tokens, kind);
  Remove(key);  // an older copy of the same state
  while (bytes_ + total > budget_ && !files_.empty()) {
    auto oldest = std::min_element(files_.begin(), files_.end(),
                                   [](const auto& a, const auto& b) { return a.second.written < b.second.written; });
    evicted_.push_back(oldest->first);
    Remove(oldest->first);
  }
  auto w = std::make_shared<PendingWrite>();
  w->key = key;
  w->ns = ns;
  w->tokens = std::move(h.tokens);
  w->kind = kind;
  w->file.reserve(total);
  w->file.assign(header.begin(), header.end());
  w->payload_offset = header.size();
  w->file.insert(w->file.end(), bytes.begin(), bytes.end());
  const int64_t generation = ++clock_;
  w->generation = generation;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Back-pressure: the engine waits only when the disk is far behind.
    cv_.wait(lock, [&] { return queue_.empty() || pending_bytes_ + total <= kMaxPendingBytes; });
    pending_bytes_ += total;
    pending_[key] = w;
    queue_.push_back(std::move(w));
  }
  cv_.notify_all();
  files_.push_back({key, {total, generation, generation}});
  bytes_ += total;
  return key;
}

StatusOr<std::vector<uint8_t>> DiskStore::Read(uint64_t key, const std::string& ns, std::span<const Token> tokens,
                                                StateKind kind) {
  const std::string path = PathOf(key);
  auto refuse = [&](const std::string& holder_ns, size_t holder_tokens) {
    ++mismatched_;
    std::fprintf(stderr, "hearth: cache file %s holds another state (namespace %s, %zu tokens), not the one asked for "
                 "(%zu tokens): their keys collide; not used\n",
                 path.c_str(), holder_ns == ns ? "the same" : "another", holder_tokens, tokens.size());
    return NotFound("cache file " + path + " holds another state");
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pending_.find(key); it != pending_.end()) {  // not on disk yet
      const PendingWrite& w = *it->second;
      if (!SameState(w.ns, w.tokens, w.kind, ns, tokens, kind)) return refuse(w.ns, w.tokens.size());
      return std::vector<uint8_t>(w.file.begin() + static_cast<std::ptrdiff_t>(w.payload_offset), w.file.end());
    }
  }
  auto read_error = [&](const Status& s) {
    ++read_errors_;
    std::fprintf(stderr, "hearth: disk tier: %s; the state is recomputed\n", s.message().c_str());
    return Unavailable(s.message());
  };
  auto file = file_system_.OpenForRead(path);
  if (!file.ok() && file.status().code() == StatusCode::kNotFound) {
    Remove(key);  // a write that failed: forget it
    return NotFound("no cache file " + path);
  }
  if (!file.ok()) return read_error(file.status());
  FileBuf buf(**file);
  std::istream in(&buf);
  StateHeader h;
  size_t header_size = 0;
  std::string why;
  const bool decoded = DecodeStateHeader(in, &h, &header_size, &why);
  if (!buf.error().ok()) return read_error(buf.error());
  if (!decoded) {
    Quarantine(path, why);
    Remove(key);
    return DataLoss("cache file " + path + ": " + why);
  }
  // The file is sound but may be another state's: it stays, for the state it belongs to.
  if (!SameState(h.ns, h.tokens, h.kind, ns, tokens, kind)) return refuse(h.ns, h.tokens.size());
  std::vector<uint8_t> out(h.payload_len);
  const bool whole = static_cast<bool>(in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())));
  if (!buf.error().ok()) return read_error(buf.error());
  if (!whole || XXH3_64bits(out.data(), out.size()) != h.payload_hash) {
    Quarantine(path, "payload truncated or checksum mismatch");
    Remove(key);
    return DataLoss("cache file " + path + " is corrupt");
  }
  for (auto& f : files_) {
    if (f.first == key) f.second.written = ++clock_;  // recently used stays longer
  }
  return out;
}

void DiskStore::Remove(uint64_t key) {
  auto it = std::find_if(files_.begin(), files_.end(), [key](const auto& f) { return f.first == key; });
  if (it == files_.end()) return;
  bytes_ -= it->second.bytes;
  files_.erase(it);
  {
    // Queued: never written; being written: the writer deletes it when done.
    std::lock_guard<std::mutex> lock(mu_);
    if (auto p = pending_.find(key); p != pending_.end()) {
      p->second->removed = true;
      pending_.erase(p);
      return;
    }
  }
  static_cast<void>(file_system_.Remove(PathOf(key)));
}

}  // namespace hearth::cache
