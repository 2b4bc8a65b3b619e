#include "cache/redis_store.h"

#include <signal.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "cache/redis_connection.h"
#include "cache/redis_layout.h"
#include "cache/redis_router.h"

namespace hearth::cache {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of chunk commands in flight on one pipeline: bounds hiredis' buffers (and what Redis
// holds for us) whatever the chunk size.
constexpr size_t kWindowBytes = 32u << 20;
// A forged or corrupt header may claim any length: reserve no more than this up front.
constexpr uint64_t kMaxReserve = uint64_t{1} << 30;

std::string_view View(const std::vector<uint8_t>& v, size_t at, size_t n) {
  return {reinterpret_cast<const char*>(v.data()) + at, n};
}

class RedisStore : public SharedStore {
 public:
  RedisStore(RedisOptions options, const RedisEndpoint& endpoint)
      : options_(std::move(options)),
        endpoint_(endpoint.Describe()),
        read_router_(endpoint, Timeouts()),
        write_router_(endpoint, Timeouts()),
        window_(std::max<size_t>(1, kWindowBytes / options_.chunk_bytes)) {
    writer_ = std::thread([this] { WriterLoop(); });
  }

  ~RedisStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      stop_by_ = Clock::now() + std::chrono::milliseconds(options_.shutdown_ms);
    }
    cv_.notify_all();
    writer_.join();
  }

  // At Open: says at once when Redis does not answer, or is set up to lose what it holds
  // in a way hearth does not expect.
  void Probe() {
    std::lock_guard<std::mutex> lock(read_mu_);
    RedisConnection& seed = read_router_.seed();
    Status s = seed.Ensure();
    NoteConnected(s);
    if (!s.ok()) return;
    auto config = [&](const char* name) -> std::string {
      auto r = seed.Command({"CONFIG", "GET", name});
      if (!r.ok() || (*r)->type != REDIS_REPLY_ARRAY || (*r)->elements != 2) return "";  // CONFIG may be renamed away
      return DescribeReply(*(*r)->element[1]);
    };
    const std::string policy = config("maxmemory-policy"), maxmemory = config("maxmemory");
    const std::string where = seed.endpoint().Describe();
    if (policy == "noeviction" || policy.rfind("volatile", 0) == 0) {
      std::fprintf(stderr,
                   "hearth: shared tier: Redis at %s has maxmemory-policy %s: hearth's keys have no TTL and "
                   "need allkeys-lru (or allkeys-lfu) to be evicted\n",
                   where.c_str(), policy.c_str());
    }
    if (maxmemory == "0") {
      std::fprintf(stderr, "hearth: shared tier: Redis at %s has no maxmemory: it grows with every state stored\n",
                   where.c_str());
    }
  }

  void Put(const std::string& ns, std::span<const Token> tokens, StateKind kind, std::vector<uint8_t> bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.puts;
    if (bytes.size() > options_.queue_bytes) {
      ++stats_.dropped;
      return;
    }
    while (!queue_.empty() && queued_bytes_ + bytes.size() > options_.queue_bytes) {
      queued_bytes_ -= queue_.front().bytes.size();
      queue_.pop_front();
      ++stats_.dropped;
    }
    queued_bytes_ += bytes.size();
    queue_.push_back(Pending{ns, std::vector<Token>(tokens.begin(), tokens.end()), kind, std::move(bytes)});
    cv_.notify_all();
  }

  SharedLookup Find(const std::string& ns, std::span<const Token> tokens, std::span<const int32_t> depths,
                    StateKind kind) override;

  bool Flush(int timeout_ms) override {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return queue_.empty() && !writing_; });
  }

  SharedStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    SharedStats s = stats_;
    s.queued_bytes = queued_bytes_;
    s.connected = connected_;
    return s;
  }

 private:
  struct Pending {
    std::string ns;
    std::vector<Token> tokens;
    StateKind kind = StateKind::kFull;
    std::vector<uint8_t> bytes;
  };

  RedisTimeouts Timeouts() const {
    return {options_.connect_timeout_ms, options_.command_timeout_ms, options_.reconnect_min_ms,
            options_.reconnect_max_ms};
  }

  // Logs when the store goes down or comes back, not on every call.
  void NoteConnected(const Status& s) {
    const bool up = s.ok() || s.code() != StatusCode::kUnavailable;
    std::lock_guard<std::mutex> lock(mu_);
    if (up == connected_ && logged_once_) return;
    logged_once_ = true;
    connected_ = up;
    if (up) {
      std::fprintf(stderr, "hearth: shared tier: connected to Redis at %s\n", endpoint_.c_str());
    } else {
      std::fprintf(stderr, "hearth: shared tier: %s; lookups miss and writes are dropped until it answers\n",
                   s.message().c_str());
    }
  }

  // Reads and verifies the state whose header value is `value`. The payload, or nullopt
  // with `*why` (kUnavailable status in `*wire` when the connection failed).
  std::optional<std::vector<uint8_t>> ReadState(const std::string& base, std::string_view value,
                                                const std::string& ns, std::span<const Token> want, StateKind kind,
                                                size_t* bytes_read, std::string* why, Status* wire);
  void WriterLoop();
  // Writes one state: chunks, then the header. Error replies go to *refused; *reached says
  // whether a connection took commands (a failure then is an error, not only a drop).
  Status Write(const Pending& p, std::string* refused, bool* reached);

  const RedisOptions options_;
  const std::string endpoint_;  // the seed, for logs
  std::mutex read_mu_;          // Finds take turns on one set of connections
  RedisRouter read_router_;     // guarded by read_mu_
  RedisRouter write_router_;     // the writer thread's alone
  const size_t window_;         // chunk commands in flight

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // guarded by mu_
  size_t queued_bytes_ = 0;    // guarded by mu_
  bool writing_ = false;       // guarded by mu_: the writer holds a state popped from queue_
  bool stopping_ = false;      // guarded by mu_
  Clock::time_point stop_by_;  // guarded by mu_
  SharedStats stats_;          // guarded by mu_
  bool connected_ = false;     // guarded by mu_
  bool logged_once_ = false;   // guarded by mu_
  std::thread writer_;
};

SharedLookup RedisStore::Find(const std::string& ns, std::span<const Token> tokens, std::span<const int32_t> depths,
                              StateKind kind) {
  const auto start = Clock::now();
  SharedLookup out;
  std::vector<int32_t> ds;
  for (int32_t d : depths) {
    if (d > 0 && d <= static_cast<int32_t>(tokens.size())) ds.push_back(d);
  }
  std::sort(ds.begin(), ds.end());
  ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
  out.asked = static_cast<int>(ds.size());
  const std::vector<std::string> bases = RedisStateBases(options_.key_prefix, ns, kind, tokens, ds);
  std::string why;     // the deepest candidate's reason, when none is usable
  Status unavailable;  // a node that did not answer
  if (!ds.empty()) {
    std::lock_guard<std::mutex> lock(read_mu_);
    std::vector<std::optional<std::string>> headers(ds.size());
    std::vector<std::string> keys;
    for (const std::string& b : bases) keys.push_back(RedisHeaderKey(b));
    Status s = read_router_.GetMany(keys, [&](size_t i, const redisReply& r) {
      if (r.type == REDIS_REPLY_STRING) {
        headers[i] = std::string(r.str, r.len);
      } else if (r.type == REDIS_REPLY_ERROR && why.empty()) {
        why = "Redis refused a read: " + DescribeReply(r);
      }
    });
    NoteConnected(s);
    unavailable = s;
    for (const auto& header : headers) out.bytes += header ? header->size() : 0;
    for (size_t i = ds.size(); i-- > 0;) {
      if (!headers[i]) continue;
      std::string reason;
      Status wire;
      auto payload = ReadState(bases[i], *headers[i], ns, tokens.first(static_cast<size_t>(ds[i])), kind, &out.bytes,
                               &reason, &wire);
      if (payload) {
        out.hit = SharedHit{ds[i], kind, std::move(*payload)};
        break;
      }
      if (why.empty()) why = "state at depth " + std::to_string(ds[i]) + ": " + reason;
      if (!wire.ok()) {  // the next candidate would meet the same connection
        NoteConnected(wire);
        why = "store unavailable: " + wire.message();
        break;
      }
    }
  }
  if (!out.hit) out.why = why.empty() && !unavailable.ok() ? "store unavailable: " + unavailable.message() : why;
  out.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.lookups;
  ++(out.hit ? stats_.hits : stats_.misses);
  if (!out.hit && !out.why.empty()) ++stats_.lookup_errors;
  stats_.bytes_read += static_cast<int64_t>(out.bytes);
  return out;
}

std::optional<std::vector<uint8_t>> RedisStore::ReadState(const std::string& base, std::string_view value,
                                                          const std::string& ns, std::span<const Token> want,
                                                          StateKind kind, size_t* bytes_read, std::string* why,
                                                          Status* wire) {
  RedisHeader h;
  if (!DecodeRedisHeader(value, &h, why)) {
    *why = "bad header: " + *why;
    return std::nullopt;
  }
  if (h.state.kind != kind || h.state.ns != ns || !std::equal(want.begin(), want.end(), h.state.tokens.begin(),
                                                              h.state.tokens.end())) {
    *why = "holds another state";
    return std::nullopt;
  }
  std::vector<uint8_t> payload;
  payload.reserve(static_cast<size_t>(std::min(h.state.payload_len, kMaxReserve)));
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < h.n_chunks; ++i) keys.push_back(RedisChunkKey(base, h.state.payload_hash, i));
  const std::string of = " of " + std::to_string(h.n_chunks);
  size_t read = 0;
  *wire = read_router_.RunOnSlot(
      base, keys.size(), [&](size_t i) { return RedisArgs{"GET", keys[i]}; },
      [&](size_t i, const redisReply& r) {
        const uint64_t expected = RedisChunkLength(h, static_cast<uint32_t>(i));
        if (r.type == REDIS_REPLY_NIL) {
          *why = "chunk " + std::to_string(i) + of + " missing (evicted)";
        } else if (r.type != REDIS_REPLY_STRING) {
          *why = "chunk " + std::to_string(i) + of + ": " + DescribeReply(r);
        } else if (r.len != expected) {
          *why = "chunk " + std::to_string(i) + of + " holds " + std::to_string(r.len) + " bytes, expected " +
                 std::to_string(expected);
        } else {
          read += r.len;
          payload.insert(payload.end(), r.str, r.str + r.len);
          return true;
        }
        return false;
      },
      std::max<uint64_t>(1, kWindowBytes / h.chunk_bytes),  // the writer's chunk size, not ours
      [&] {
        why->clear();
        payload.clear();
        read = 0;
      });
  *bytes_read += read;
  if (!wire->ok()) {
    *why = wire->message();
    return std::nullopt;
  }
  if (!why->empty()) return std::nullopt;
  if (XXH3_64bits(payload.data(), payload.size()) != h.state.payload_hash) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return payload;
}

void RedisStore::WriterLoop() {
  while (true) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      writing_ = false;
      cv_.notify_all();
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, all written
      if (stopping_ && Clock::now() >= stop_by_) {
        stats_.dropped += static_cast<int64_t>(queue_.size());
        queue_.clear();
        queued_bytes_ = 0;
        cv_.notify_all();
        return;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= p.bytes.size();
      writing_ = true;
    }
    std::string refused;
    bool had = false;
    Status s = Write(p, &refused, &had);
    NoteConnected(s);
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok() && refused.empty()) {
      ++stats_.written;
      stats_.bytes_written += static_cast<int64_t>(p.bytes.size());
      continue;
    }
    ++stats_.dropped;
    // A write that reached Redis and failed there or on the wire is an error; one never
    // tried because Redis is down (in the backoff) is only a drop.
    if (!refused.empty() || had) ++stats_.write_errors;
    if (!refused.empty()) std::fprintf(stderr, "hearth: shared tier: a state was not written: %s\n", refused.c_str());
  }
}

Status RedisStore::Write(const Pending& p, std::string* refused, bool* reached) {
  const int32_t depth = static_cast<int32_t>(p.tokens.size());
  const std::string base = RedisStateBases(options_.key_prefix, p.ns, p.kind, p.tokens, std::span(&depth, 1))[0];
  RedisHeader h;
  h.state.kind = p.kind;
  h.state.ns = p.ns;
  h.state.tokens = p.tokens;
  h.state.payload_len = p.bytes.size();
  h.state.payload_hash = XXH3_64bits(p.bytes.data(), p.bytes.size());
  h.chunk_bytes = options_.chunk_bytes;
  const uint64_t n_chunks = (p.bytes.size() + h.chunk_bytes - 1) / h.chunk_bytes;
  if (n_chunks > kMaxRedisChunks) {
    *refused = "state of " + std::to_string(p.bytes.size()) + " bytes needs more than " +
               std::to_string(kMaxRedisChunks) + " chunks: raise the chunk size";
    return Status::Ok();
  }
  h.n_chunks = static_cast<uint32_t>(n_chunks);
  const std::string header = EncodeRedisHeader(h);
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < h.n_chunks; ++i) keys.push_back(RedisChunkKey(base, h.state.payload_hash, i));
  auto check = [&](size_t, const redisReply& r) {
    if (r.type == REDIS_REPLY_ERROR) *refused = DescribeReply(r);
    return refused->empty();
  };
  auto restart = [&] { refused->clear(); };
  Status s = write_router_.RunOnSlot(
      base, keys.size(),
      [&](size_t i) {
        *reached = true;
        const uint32_t at = static_cast<uint32_t>(i);
        return RedisArgs{"SET", keys[i], View(p.bytes, at * h.chunk_bytes, RedisChunkLength(h, at))};
      },
      check, window_, restart);
  if (!s.ok() || !refused->empty()) return s;  // no header: the chunks written are orphans for LRU to take
  const std::string header_key = RedisHeaderKey(base);
  return write_router_.RunOnSlot(
      base, 1, [&](size_t) { return RedisArgs{"SET", header_key, header}; }, check, 1, restart);
}

}  // namespace

StatusOr<std::unique_ptr<SharedStore>> OpenRedisStore(const RedisOptions& options) {
  auto endpoint = ParseRedisUrl(options.url);
  if (!endpoint.ok()) return endpoint.status();
  if (options.chunk_bytes == 0) return InvalidArgument("Redis store: chunk size must be positive");
  if (options.key_prefix.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("Redis store: key prefix \"" + options.key_prefix +
                           "\" holds a brace (the hash tag {...} follows the prefix)");
  }
  if (options.connect_timeout_ms <= 0 || options.command_timeout_ms <= 0 || options.reconnect_min_ms <= 0 ||
      options.reconnect_max_ms < options.reconnect_min_ms) {
    return InvalidArgument("Redis store: timeouts must be positive, reconnect_max_ms >= reconnect_min_ms");
  }
  // hiredis sends with write(2): on a connection Redis has closed, the second write fails
  // with EPIPE and raises SIGPIPE, whose default ends the process. Ignored, it is an error
  // the store handles (the state is dropped). A handler someone installed is left alone.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  auto store = std::make_unique<RedisStore>(options, *endpoint);
  store->Probe();
  return std::unique_ptr<SharedStore>(std::move(store));
}

}  // namespace hearth::cache
