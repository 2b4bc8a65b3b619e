#include "cache/disk_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hearth::cache {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'S', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kSuffix = ".state";
constexpr size_t kMaxPendingBytes = 64u << 20;  // queued for the writer before Write waits (counts against resident memory)

// Serialized header fields, in order.
struct Header {
  uint32_t version = kFormatVersion;
  uint32_t kind = 0;
  std::string ns;
  std::vector<Token> tokens;
  uint64_t payload_len = 0;
  uint64_t payload_hash = 0;
};

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string EncodeHeader(const Header& h) {
  std::string out(kMagic, sizeof(kMagic));
  Put(&out, h.version);
  Put(&out, h.kind);
  Put(&out, static_cast<uint32_t>(h.ns.size()));
  out += h.ns;
  Put(&out, static_cast<uint32_t>(h.tokens.size()));
  out.append(reinterpret_cast<const char*>(h.tokens.data()), h.tokens.size() * sizeof(Token));
  Put(&out, h.payload_len);
  Put(&out, h.payload_hash);
  Put(&out, static_cast<uint64_t>(XXH3_64bits(out.data(), out.size())));
  return out;
}

// Reads and checks the header; on success `*header_size` is where the payload starts.
bool DecodeHeader(std::ifstream& in, Header* h, size_t* header_size, std::string* why) {
  std::string raw(sizeof(kMagic), '\0');
  auto get = [&](void* dst, size_t n) {
    std::string tmp(n, '\0');
    if (!in.read(tmp.data(), static_cast<std::streamsize>(n))) return false;
    std::memcpy(dst, tmp.data(), n);
    raw += tmp;
    return true;
  };
  if (!in.read(raw.data(), sizeof(kMagic)) || std::memcmp(raw.data(), kMagic, sizeof(kMagic)) != 0) {
    *why = "not a hearth state file";
    return false;
  }
  uint32_t ns_len = 0, n_tokens = 0;
  if (!get(&h->version, 4) || !get(&h->kind, 4) || !get(&ns_len, 4) || ns_len > (1u << 16)) {
    *why = "truncated header";
    return false;
  }
  if (h->version != kFormatVersion) {
    *why = "format version " + std::to_string(h->version);
    return false;
  }
  h->ns.resize(ns_len);
  if (!get(h->ns.data(), ns_len) || !get(&n_tokens, 4) || n_tokens > (1u << 24)) {
    *why = "truncated header";
    return false;
  }
  h->tokens.resize(n_tokens);
  uint64_t stored_hash = 0;
  if (!get(h->tokens.data(), n_tokens * sizeof(Token)) || !get(&h->payload_len, 8) || !get(&h->payload_hash, 8)) {
    *why = "truncated header";
    return false;
  }
  const uint64_t computed = XXH3_64bits(raw.data(), raw.size());
  if (!in.read(reinterpret_cast<char*>(&stored_hash), 8) || stored_hash != computed) {
    *why = "header checksum mismatch";
    return false;
  }
  if (h->kind > static_cast<uint32_t>(StateKind::kPartial)) {
    *why = "unknown state kind";
    return false;
  }
  *header_size = raw.size() + 8;
  return true;
}

uint64_t KeyOf(const std::string& ns, std::span<const Token> tokens, StateKind kind) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, ns.data(), ns.size());
  const auto k = static_cast<uint32_t>(kind);
  XXH3_64bits_update(st, &k, sizeof(k));
  XXH3_64bits_update(st, tokens.data(), tokens.size() * sizeof(Token));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<DiskStore>> DiskStore::Open(const std::string& dir, size_t budget_bytes,
                                                     const std::string& ns_prefix) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "quarantine", ec);
  if (ec) return Unavailable("cannot create cache directory " + dir + ": " + ec.message());
  auto store = std::unique_ptr<DiskStore>(new DiskStore(dir, budget_bytes, ns_prefix));
  store->Load();
  return store;
}

DiskStore::DiskStore(std::string dir, size_t budget, std::string ns_prefix)
    : dir_(std::move(dir)), budget_(budget), ns_prefix_(std::move(ns_prefix)), writer_([this] { WriterLoop(); }) {}

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
    const Status written = WriteFile(path, w->file);
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
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

std::string DiskStore::PathOf(uint64_t key) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key));
  return (fs::path(dir_) / (std::string(name) + kSuffix)).string();
}

void DiskStore::Quarantine(const std::string& path, const std::string& why) {
  std::error_code ec;
  const fs::path to = fs::path(dir_) / "quarantine" / fs::path(path).filename();
  fs::rename(path, to, ec);
  if (ec) fs::remove(path, ec);
  ++quarantined_;
  std::fprintf(stderr, "hearth: cache file %s quarantined: %s\n", path.c_str(), why.c_str());
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
    Header h;
    size_t header_size = 0;
    std::string why;
    if (!DecodeHeader(in, &h, &header_size, &why)) {
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
    e.kind = static_cast<StateKind>(h.kind);
    e.bytes = size;
    e.key = KeyOf(e.ns, e.tokens, e.kind);
    if (PathOf(e.key) != path) {
      Quarantine(path, "file name does not match its content");
      continue;
    }
    found.emplace_back(de.last_write_time(), std::move(e));
  }
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
  Header h;
  h.kind = static_cast<uint32_t>(kind);
  h.ns = ns;
  h.tokens.assign(tokens.begin(), tokens.end());
  h.payload_len = bytes.size();
  h.payload_hash = XXH3_64bits(bytes.data(), bytes.size());
  const std::string header = EncodeHeader(h);
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

StatusOr<std::vector<uint8_t>> DiskStore::Read(uint64_t key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pending_.find(key); it != pending_.end()) {  // not on disk yet
      const auto& file = it->second->file;
      return std::vector<uint8_t>(file.begin() + static_cast<std::ptrdiff_t>(it->second->payload_offset), file.end());
    }
  }
  const std::string path = PathOf(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Remove(key);  // a write that failed: forget it
    return NotFound("no cache file " + path);
  }
  Header h;
  size_t header_size = 0;
  std::string why;
  if (!DecodeHeader(in, &h, &header_size, &why)) {
    Quarantine(path, why);
    Remove(key);
    return DataLoss("cache file " + path + ": " + why);
  }
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
