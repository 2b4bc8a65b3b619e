// RedisStore against a real redis-server on loopback (testing/redis_server.h): two store
// objects stand for two replicas; keys are deleted and forged behind their backs.
#include "cache/redis_store.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "cache/redis_connection.h"
#include "cache/redis_layout.h"
#include "testing/redis_server.h"

namespace hearth::cache {
namespace {

using Clock = std::chrono::steady_clock;
using ::hearth::testing::RedisReply;
using ::hearth::testing::RedisServer;

std::vector<Token> Prompt(size_t n, Token first = 1) {
  std::vector<Token> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7 + i / 251);
  return b;
}

RedisOptions Options(const RedisServer& server, size_t chunk_bytes = 4u << 20) {
  RedisOptions o;
  o.url = server.url();
  o.chunk_bytes = chunk_bytes;
  o.reconnect_min_ms = 20;
  o.reconnect_max_ms = 200;
  o.command_timeout_ms = 500;
  o.connect_timeout_ms = 300;
  return o;
}

std::unique_ptr<SharedStore> Open(const RedisOptions& o) {
  auto s = OpenRedisStore(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// The key base of the state holding exactly `tokens`.
std::string Base(const std::string& ns, std::span<const Token> tokens, StateKind kind) {
  const auto d = static_cast<int32_t>(tokens.size());
  return RedisStateBases("hearth:", ns, kind, tokens, std::span(&d, 1))[0];
}

std::string ChunkKey(const std::string& ns, std::span<const Token> tokens, StateKind kind,
                     const std::vector<uint8_t>& bytes, uint32_t i) {
  return RedisChunkKey(Base(ns, tokens, kind), XXH3_64bits(bytes.data(), bytes.size()), i);
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()) << "see " << server_.log_path(); }
  RedisServer server_;
};

TEST_F(RedisStoreTest, AReplicaFindsAnothersStateAtTheDeepestCandidate) {
  auto a = Open(Options(server_));
  auto b = Open(Options(server_));
  ASSERT_TRUE(a && b);
  const std::vector<Token> prompt = Prompt(100);
  const std::span<const Token> p(prompt);
  const auto shallow = Bytes(3000, 1), deep = Bytes(5000, 2), other_kind = Bytes(100, 3);
  a->Put("ns", p.first(40), StateKind::kFull, shallow);
  a->Put("ns", p.first(80), StateKind::kFull, deep);
  a->Put("ns", p.first(90), StateKind::kPartial, other_kind);
  ASSERT_TRUE(a->Flush(5000));
  EXPECT_EQ(a->stats().written, 3);

  const std::vector<int32_t> depths = {20, 40, 60, 80, 85, 100, 0, 120};
  SharedLookup found = b->Find("ns", p, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->depth, 80);
  EXPECT_EQ(found.hit->bytes, deep);
  EXPECT_EQ(found.asked, 6);  // 0 and 120 are not candidates
  EXPECT_TRUE(found.why.empty());

  // Another namespace or kind, or a prompt that differs inside the state: nothing.
  EXPECT_FALSE(b->Find("other", p, depths, StateKind::kFull).hit);
  std::vector<Token> edited = prompt;
  edited[10] = 9999;
  EXPECT_FALSE(b->Find("ns", edited, depths, StateKind::kFull).hit);
  SharedLookup partial = b->Find("ns", p, depths, StateKind::kPartial);
  EXPECT_FALSE(partial.hit);  // the partial state is at 90, not a candidate
  EXPECT_TRUE(partial.why.empty()) << partial.why;

  // The deeper one gone (evicted whole): the shallower one.
  ASSERT_EQ(server_.Command({"DEL", RedisHeaderKey(Base("ns", p.first(80), StateKind::kFull))}).integer, 1);
  found = b->Find("ns", p, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->depth, 40);
  EXPECT_EQ(found.hit->bytes, shallow);
  const SharedStats stats = b->stats();
  EXPECT_EQ(stats.lookups, 5);
  EXPECT_EQ(stats.hits, 2);
  EXPECT_TRUE(stats.connected);
}

TEST_F(RedisStoreTest, ABrokenStateIsAMissWithWhyAndTheNextDeepestServes) {
  auto store = Open(Options(server_, 1000));
  ASSERT_TRUE(store);
  const std::vector<Token> prompt = Prompt(64);
  const std::span<const Token> p(prompt);
  const auto shallow = Bytes(2500, 4), deep = Bytes(10500, 5);  // 3 and 11 chunks
  store->Put("ns", p.first(32), StateKind::kFull, shallow);
  store->Put("ns", p, StateKind::kFull, deep);
  ASSERT_TRUE(store->Flush(5000));
  EXPECT_EQ(server_.Keys("hearth:*").size(), 2u + 3u + 11u);
  const std::vector<int32_t> deepest = {64};
  SharedLookup found = store->Find("ns", p, deepest, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->bytes, deep);

  // One chunk evicted: a miss naming it; with a shallower candidate, that one.
  ASSERT_EQ(server_.Command({"DEL", ChunkKey("ns", p, StateKind::kFull, deep, 3)}).integer, 1);
  found = store->Find("ns", p, deepest, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_NE(found.why.find("chunk 3 of 11 missing"), std::string::npos) << found.why;
  const std::vector<int32_t> both = {32, 64};
  found = store->Find("ns", p, both, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->depth, 32);
  EXPECT_EQ(found.hit->bytes, shallow);

  // A chunk overwritten with other bytes of its length: the checksum refuses it.
  store->Put("ns", p, StateKind::kFull, deep);
  ASSERT_TRUE(store->Flush(5000));
  ASSERT_TRUE(store->Find("ns", p, deepest, StateKind::kFull).hit);
  const auto junk = Bytes(1000, 99);
  server_.Command({"SET", ChunkKey("ns", p, StateKind::kFull, deep, 5), std::string(junk.begin(), junk.end())});
  found = store->Find("ns", p, deepest, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_EQ(found.why, "state at depth 64: checksum mismatch");
  // ... and a chunk of another length is refused before that.
  server_.Command({"SET", ChunkKey("ns", p, StateKind::kFull, deep, 5), "short"});
  found = store->Find("ns", p, deepest, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_NE(found.why.find("chunk 5 of 11 holds 5 bytes"), std::string::npos) << found.why;
  EXPECT_EQ(store->stats().lookup_errors, 3);
}

TEST_F(RedisStoreTest, AHeaderOfAnotherStateUnderTheKeyIsAMiss) {
  auto store = Open(Options(server_, 1000));
  ASSERT_TRUE(store);
  const std::vector<Token> asked = Prompt(50), other = Prompt(50, 1000);
  const auto bytes = Bytes(4000, 6);
  store->Put("ns", other, StateKind::kFull, bytes);
  ASSERT_TRUE(store->Flush(5000));
  // Another state's header and chunks, whole and sound, moved under the asked state's keys
  // (what a hash collision would look like).
  const std::string from = Base("ns", other, StateKind::kFull), to = Base("ns", asked, StateKind::kFull);
  const uint64_t hash = XXH3_64bits(bytes.data(), bytes.size());
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_EQ(server_.Command({"RENAME", RedisChunkKey(from, hash, i), RedisChunkKey(to, hash, i)}).str, "OK");
  }
  ASSERT_EQ(server_.Command({"RENAME", RedisHeaderKey(from), RedisHeaderKey(to)}).str, "OK");
  const std::vector<int32_t> depths = {50};
  SharedLookup found = store->Find("ns", asked, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_EQ(found.why, "state at depth 50: holds another state");
  // A sound header claiming billions of chunks: refused before any list of keys is made.
  RedisHeader huge;
  huge.state = {0, StateKind::kFull, "ns", asked, (uint64_t{1} << 32) - 1, 0};
  huge.chunk_bytes = 1;
  huge.n_chunks = UINT32_MAX;
  server_.Command({"SET", RedisHeaderKey(to), EncodeRedisHeader(huge)});
  found = store->Find("ns", asked, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_NE(found.why.find("bad header: header's chunk layout"), std::string::npos) << found.why;
  // A header that is not one: refused too.
  server_.Command({"SET", RedisHeaderKey(to), "HEARTHS1 and then junk"});
  found = store->Find("ns", asked, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_NE(found.why.find("bad header"), std::string::npos) << found.why;
}

TEST_F(RedisStoreTest, RedisDownIsAQuickMissAndDroppedWritesThenItReconnects) {
  auto store = Open(Options(server_));
  ASSERT_TRUE(store);
  const std::vector<Token> prompt = Prompt(30);
  const std::vector<int32_t> depths = {10, 30};
  const auto bytes = Bytes(1 << 20, 7);
  server_.Stop();

  auto start = Clock::now();
  SharedLookup found = store->Find("ns", prompt, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_EQ(found.why.rfind("store unavailable: ", 0), 0u) << found.why;
  for (int i = 0; i < 20; ++i) store->Put("ns", prompt, StateKind::kFull, bytes);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_TRUE(store->Flush(5000));
  SharedStats stats = store->stats();
  EXPECT_EQ(stats.dropped, 20);
  EXPECT_EQ(stats.written, 0);
  EXPECT_FALSE(stats.connected);

  // Stalled (accepts, never answers): bounded by the command timeout.
  ASSERT_TRUE(server_.Start());
  server_.Pause();
  start = Clock::now();
  found = store->Find("ns", prompt, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_EQ(found.why.rfind("store unavailable: ", 0), 0u) << found.why;
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2500));
  server_.Resume();

  // Back on the same port: after its backoff the store writes and reads again.
  bool hit = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(10); !hit && Clock::now() < deadline;) {
    store->Put("ns", prompt, StateKind::kFull, bytes);
    store->Flush(2000);
    found = store->Find("ns", prompt, depths, StateKind::kFull);
    hit = found.hit && found.hit->bytes == bytes;
    if (!hit) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(hit) << found.why;
  EXPECT_TRUE(store->stats().connected);
}

// A Redis that dies between two writes: the next write goes out on a connection the peer
// has closed, and the second send(2) of it fails with EPIPE, which without care raises
// SIGPIPE and ends the process. The state is dropped and counted; the process lives.
TEST_F(RedisStoreTest, ARedisGoneMidWriteDropsTheStateAndTheProcessLives) {
  auto store = Open(Options(server_, 8u << 20));
  ASSERT_TRUE(store);
  const std::vector<Token> prompt = Prompt(8);
  store->Put("ns", prompt, StateKind::kFull, Bytes(100, 1));
  ASSERT_TRUE(store->Flush(5000));  // the writer's connection is up
  server_.Stop();
  store->Put("ns", prompt, StateKind::kFull, Bytes(8u << 20, 2));
  ASSERT_TRUE(store->Flush(5000));
  const SharedStats stats = store->stats();
  EXPECT_EQ(stats.written, 1);
  EXPECT_EQ(stats.dropped, 1);
  EXPECT_EQ(stats.write_errors, 1);
}

TEST(RedisStoreDownTest, OpensWhileRedisIsDown) {
  RedisServer server;
  ASSERT_TRUE(server.Start());
  server.Stop();  // the port it had, with nothing listening
  auto store = Open(Options(server));
  ASSERT_TRUE(store);
  const std::vector<Token> prompt = Prompt(8);
  const std::vector<int32_t> depths = {8};
  SharedLookup found = store->Find("ns", prompt, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_EQ(found.why.rfind("store unavailable: ", 0), 0u) << found.why;
  EXPECT_FALSE(store->stats().connected);
}

// A Redis that takes connections and never answers holds the writer for its command
// timeout per state: Put still returns at once, and the queue stays in its bound.
TEST_F(RedisStoreTest, PutNeverBlocksAndTheQueueStaysInItsBound) {
  RedisOptions o = Options(server_);
  o.queue_bytes = 4u << 20;
  auto store = Open(o);
  ASSERT_TRUE(store);
  server_.Pause();
  const std::vector<Token> prompt = Prompt(8);
  const auto bytes = Bytes(1 << 20, 8);
  const auto start = Clock::now();
  for (int i = 0; i < 50; ++i) store->Put("ns", prompt, StateKind::kFull, bytes);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));  // waiting for room: 500 ms per state
  SharedStats stats = store->stats();
  EXPECT_LE(stats.queued_bytes, o.queue_bytes);
  EXPECT_GE(stats.dropped, 50 - 5);  // at most the bound's 4 and the one being written
  server_.Resume();
  EXPECT_TRUE(store->Flush(10000));
  stats = store->stats();
  EXPECT_EQ(stats.dropped + stats.written, 50);
}

TEST(RedisStoreEvictionTest, ATinyMaxmemoryEvictsButNeverErrsOrServesWrongBytes) {
  RedisServer server({"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"});
  ASSERT_TRUE(server.Start());
  auto store = Open(Options(server, 64u << 10));
  ASSERT_TRUE(store);
  constexpr int kStates = 40;
  for (int i = 0; i < kStates; ++i) {
    store->Put("ns", Prompt(20, i * 100), StateKind::kFull, Bytes(200u << 10, static_cast<uint8_t>(i)));
  }
  ASSERT_TRUE(store->Flush(20000));
  SharedStats stats = store->stats();
  EXPECT_EQ(stats.write_errors, 0);
  EXPECT_EQ(stats.written, kStates);
  int hits = 0;
  const std::vector<int32_t> depths = {20};
  for (int i = 0; i < kStates; ++i) {
    SharedLookup found = store->Find("ns", Prompt(20, i * 100), depths, StateKind::kFull);
    if (found.hit) {
      ++hits;
      EXPECT_EQ(found.hit->bytes, Bytes(200u << 10, static_cast<uint8_t>(i))) << i;
    } else {
      EXPECT_EQ(found.why.find("unavailable"), std::string::npos) << found.why;
      EXPECT_EQ(found.why.find("refused"), std::string::npos) << found.why;
    }
  }
  EXPECT_GT(hits, 0);           // the newest fit
  EXPECT_LT(hits, kStates / 2);  // 8 MB into 4 MB (1 of it Redis's own): most were evicted
}

TEST(RedisUrlTest, RefusesBadUrlsAndTls) {
  for (const char* bad : {"", "http://h:1", "redis://", "redis://:6379", "redis://h:", "redis://h:0",
                          "redis://h:99999", "redis://h:12x", "redis://h:1/db", "unix://rel/path", "redis://[::1"}) {
    RedisOptions o;
    o.url = bad;
    auto s = OpenRedisStore(o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("bad Redis URL"), std::string::npos) << s.status().message();
  }
  RedisOptions tls;
  tls.url = "rediss://cache.example:6380";
  auto s = OpenRedisStore(tls);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("TLS"), std::string::npos);
  RedisOptions brace;
  brace.url = "redis://127.0.0.1:1";
  brace.key_prefix = "a{b}:";
  EXPECT_EQ(OpenRedisStore(brace).status().code(), StatusCode::kInvalidArgument);

  auto ep = ParseRedisUrl("redis://me:p%40ss@cache.example:1234/3");
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(ep->host, "cache.example");
  EXPECT_EQ(ep->port, 1234);
  EXPECT_EQ(ep->user, "me");
  EXPECT_EQ(ep->password, "p@ss");
  EXPECT_EQ(ep->db, 3);
  ep = ParseRedisUrl("redis://:secret@[::1]:6380");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->port, 6380);
  EXPECT_EQ(ep->user, "");
  EXPECT_EQ(ep->password, "secret");
  ep = ParseRedisUrl("unix:///run/redis.sock");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->unix_path, "/run/redis.sock");
  EXPECT_EQ(ParseRedisUrl("redis://h")->port, 6379);
}

TEST(RedisStoreAuthTest, APasswordAndDatabaseFromTheUrlAreUsed) {
  RedisServer server({"--requirepass", "s3cret"});
  ASSERT_TRUE(server.Start());
  RedisOptions o = Options(server);
  o.url = "redis://:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/2";
  auto store = Open(o);
  ASSERT_TRUE(store);
  const std::vector<Token> prompt = Prompt(5);
  const std::vector<int32_t> depths = {5};
  store->Put("ns", prompt, StateKind::kFull, Bytes(10, 9));
  ASSERT_TRUE(store->Flush(5000));
  SharedLookup found = store->Find("ns", prompt, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  o.url = "redis://:s3cret@127.0.0.1:" + std::to_string(server.port());  // database 0: not there
  EXPECT_FALSE(Open(o)->Find("ns", prompt, depths, StateKind::kFull).hit);

  o.url = "redis://:wrong@127.0.0.1:" + std::to_string(server.port());
  auto wrong = Open(o);
  ASSERT_TRUE(wrong);
  found = wrong->Find("ns", prompt, depths, StateKind::kFull);
  EXPECT_FALSE(found.hit);
  EXPECT_NE(found.why.find("AUTH refused"), std::string::npos) << found.why;
}

}  // namespace
}  // namespace hearth::cache
