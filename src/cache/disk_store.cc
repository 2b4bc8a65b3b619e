#include "cache/disk_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "cache/state_file.h"

namespace hearth::cache {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSuffix = ".state";
constexpr size_t kMaxPendingBytes = 64u << 20;  // queued for the writer before Write waits (counts against resident memory)

bool SameState(const std::string& ns, std::span<const Token> tokens, StateKind kind, const std::string& want_ns,
               std::span<const Token> want_tokens, StateKind want_kind) {
  return kind == want_kind && ns == want_ns && std::equal(tokens.begin(), tokens.end(), want_tokens.begin(), want_tokens.end());
}

}  // namespace

StatusOr<std::unique_ptr<DiskStore>> DiskStore::Open(const std::string& dir, size_t budget_bytes,
                                                     const std::string& ns_prefix, Options options) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "quarantine", ec);
  if (ec) return Unavailable("cannot create cache directory " + dir + ": " + ec.message());
  auto store = std::unique_ptr<DiskStore>(new DiskStore(dir, budget_bytes, ns_prefix, options));
  store->Load();
  return store;
}

DiskStore::DiskStore(std::string dir, size_t budget, std::string ns_prefix, Options options)
    : dir_(std::move(dir)),
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
    if (!written.ok()) std::fprintf(stderr, "hearth: %s\n", written.message().c_str());
    std::lock_guard<std::mutex> lock(mu_);
    if (w->removed) {
      std::error_code ec;
      fs::remove(path, ec);
    }
    auto it = pending_.find(w->key);
    if (it != pending_.end() && it->second == w) pending_.erase(it);
    pending_bytes_ -= w->file.size();
    cv_.notify_all();
  }
}

Status DiskStore::WriteFile(const std::string& path, const std::vector<uint8_t>& file) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // Private: the header holds the conversation's tokens, which detokenize to its text.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = WriteAll(fd, file.data(), file.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
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
  std::error_code ec;
  const fs::path to = fs::path(dir_) / "quarantine" / fs::path(path).filename();
  fs::rename(path, to, ec);
  if (ec) {
    fs::remove(path, ec);
  } else {
    fs::last_write_time(to, fs::file_time_type::clock::now(), ec);  // its age in quarantine, for pruning
  }
  ++quarantined_;
  std::fprintf(stderr, "hearth: cache file %s quarantined: %s\n", path.c_str(), why.c_str());
  PruneQuarantine();
}

void DiskStore::PruneQuarantine() {
  struct Bad {
    fs::file_time_type moved;
    std::string name;
    size_t bytes = 0;
  };
  std::error_code ec;
  const fs::path qdir = fs::path(dir_) / "quarantine";
  std::vector<Bad> bad;
  for (const auto& de : fs::directory_iterator(qdir, ec)) {
    std::error_code fec;
    if (!de.is_regular_file(fec)) continue;
    const auto size = de.file_size(fec);
    bad.push_back({de.last_write_time(fec), de.path().filename().string(), fec ? 0 : static_cast<size_t>(size)});
  }
  // Newest first: keep a prefix within both bounds, and always the newest.
  std::sort(bad.begin(), bad.end(), [](const Bad& a, const Bad& b) { return std::tie(b.moved, b.name) < std::tie(a.moved, a.name); });
  size_t kept_bytes = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    kept_bytes += bad[i].bytes;
    if (i == 0 || (i < options_.quarantine_files && kept_bytes <= options_.quarantine_bytes)) continue;
    fs::remove(qdir / bad[i].name, ec);
  }
}

void DiskStore::Load() {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, Entry>> found;
  for (const auto& de : fs::directory_iterator(dir_, ec)) {
    if (!de.is_regular_file()) continue;
    const std::string path = de.path().string();
    const std::string name = de.path().filename().string();
    if (name.find(".tmp") != std::string::npos) {  // a write interrupted by a crash
      fs::remove(de.path(), ec);
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    std::ifstream in(path, std::ios::binary);
    StateHeader h;
    size_t header_size = 0;
    std::string why;
    if (!DecodeStateHeader(in, &h, &header_size, &why)) {
      Quarantine(path, why);
      continue;
    }
    if (!h.ns.starts_with(ns_prefix_)) {
      Quarantine(path, "belongs to another model or context configuration");
      continue;
    }
    const size_t size = static_cast<size_t>(de.file_size());
    if (size != header_size + h.payload_len) {
      Quarantine(path, "size " + std::to_string(size) + " != " + std::to_string(header_size + h.payload_len));
      continue;
    }
    Entry e;
    e.ns = h.ns;
    e.tokens = std::move(h.tokens);
    e.kind = h.kind;
    e.bytes = size;
    e.key = KeyOf(e.ns, e.tokens, e.kind);
    if (PathOf(e.key) != path) {
      Quarantine(path, "file name does not match its content");
      continue;
    }
    found.emplace_back(de.last_write_time(), std::move(e));
  }
  PruneQuarantine();  // also what an earlier run left there
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [t, e] : found) {
    files_.push_back({e.key, {e.bytes, ++clock_}});
    bytes_ += e.bytes;
    found_.push_back(std::move(e));
  }
}

StatusOr<uint64_t> DiskStore::Write(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                                    std::span<const uint8_t> bytes) {
  evicted_.clear();
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
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Back-pressure: the engine waits only when the disk is far behind.
    cv_.wait(lock, [&] { return queue_.empty() || pending_bytes_ + total <= kMaxPendingBytes; });
    pending_bytes_ += total;
    pending_[key] = w;
    queue_.push_back(std::move(w));
  }
  cv_.notify_all();
  files_.push_back({key, {total, ++clock_}});
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Remove(key);  // a write that failed: forget it
    return NotFound("no cache file " + path);
  }
  StateHeader h;
  size_t header_size = 0;
  std::string why;
  if (!DecodeStateHeader(in, &h, &header_size, &why)) {
    Quarantine(path, why);
    Remove(key);
    return DataLoss("cache file " + path + ": " + why);
  }
  // The file is sound but may be another state's: it stays, for the state it belongs to.
  if (!SameState(h.ns, h.tokens, h.kind, ns, tokens, kind)) return refuse(h.ns, h.tokens.size());
  std::vector<uint8_t> out(h.payload_len);
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())) ||
      XXH3_64bits(out.data(), out.size()) != h.payload_hash) {
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
  std::error_code ec;
  fs::remove(PathOf(key), ec);
}

}  // namespace hearth::cache
