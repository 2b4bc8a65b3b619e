// RedisStore against a real 3-node Redis Cluster on loopback, reached from one seed URL.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "cache/redis_layout.h"
#include "cache/redis_router.h"
#include "cache/redis_store.h"
#include "testing/redis_server.h"

namespace hearth::cache {
namespace {

using ::hearth::testing::RedisServer;

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed * 13 + i * 7 + i / 251);
  return b;
}

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string create = "redis-cli --cluster create";
    for (int i = 0; i < 3; ++i) {
      nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{
          "--cluster-enabled", "yes", "--cluster-config-file", "/tmp/hearth-redis-nodes-{port}.conf"}));
      ASSERT_TRUE(nodes_.back()->Start()) << "see " << nodes_.back()->log_path();
      create += " 127.0.0.1:" + std::to_string(nodes_.back()->port());
    }
    create += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
    ASSERT_EQ(std::system(create.c_str()), 0) << create;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (const auto& node : nodes_) {
      while (node->Command({"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the cluster did not come up";
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  void TearDown() override {
    for (const auto& node : nodes_) {
      node->Stop();
      ::unlink(("/tmp/hearth-redis-nodes-" + std::to_string(node->port()) + ".conf").c_str());
    }
  }

  std::unique_ptr<SharedStore> Open() const {
    RedisOptions o;
    o.url = nodes_[0]->url();
    o.chunk_bytes = 1000;
    auto s = OpenRedisStore(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

TEST_F(RedisClusterTest, OneSeedUrlReachesEveryNodeAndAStateStaysOnOneNode) {
  for (const char* key : {"hearth:{0123456789abcdef}:h", "plain-key", "a{}b", "{x}y{z}"}) {
    EXPECT_EQ(RedisKeySlot(key), nodes_[0]->Command({"CLUSTER", "KEYSLOT", key}).integer) << key;
  }
  auto writer = Open(), reader = Open();
  ASSERT_TRUE(writer && reader);
  std::vector<Token> prompt(200);
  std::iota(prompt.begin(), prompt.end(), 1);
  const std::span<const Token> p(prompt);
  std::vector<int32_t> depths;
  for (int32_t d = 10; d <= 150; d += 10) {
    depths.push_back(d);
    writer->Put("ns", p.first(static_cast<size_t>(d)), StateKind::kFull, Bytes(2500, static_cast<uint8_t>(d)));
  }
  ASSERT_TRUE(writer->Flush(10000));
  EXPECT_EQ(writer->stats().written, 15);
  EXPECT_EQ(writer->stats().write_errors, 0);

  // Spread over the nodes, each state (header and 3 chunks) on one.
  std::map<std::string, std::set<int>> nodes_of_state;
  int nodes_used = 0;
  for (int n = 0; n < 3; ++n) {
    const auto keys = nodes_[n]->Keys("hearth:*");
    nodes_used += keys.empty() ? 0 : 1;
    for (const auto& key : keys) nodes_of_state[key.substr(0, key.find('}') + 1)].insert(n);
  }
  EXPECT_GE(nodes_used, 2);
  EXPECT_EQ(nodes_of_state.size(), 15u);
  for (const auto& [base, where] : nodes_of_state) EXPECT_EQ(where.size(), 1u) << base;

  // One lookup over candidates on several nodes: the deepest; without it the next.
  SharedLookup found = reader->Find("ns", prompt, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->depth, 150);
  EXPECT_TRUE(found.hit->bytes == Bytes(2500, 150));
  for (const auto& [base, where] : nodes_of_state) {
    for (int d : {150, 140}) {
      const std::vector<int32_t> one = {d};
      if (base == RedisStateBases("hearth:", "ns", StateKind::kFull, p.first(static_cast<size_t>(d)), one)[0]) {
        EXPECT_EQ(nodes_[*where.begin()]->Command({"DEL", base + ":h"}).integer, 1);
      }
    }
  }
  found = reader->Find("ns", prompt, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_EQ(found.hit->depth, 130);
  EXPECT_TRUE(found.hit->bytes == Bytes(2500, 130));
}

// A slot being migrated (MIGRATING on its node, IMPORTING on the next): keys already moved
// are answered with ASK, which the store follows for that command without learning it.
TEST_F(RedisClusterTest, AStateWhoseSlotIsMigratingIsReadAndWrittenOnBothNodes) {
  auto store = Open();
  ASSERT_TRUE(store);
  std::vector<Token> prompt(50);
  std::iota(prompt.begin(), prompt.end(), 7);
  const std::vector<int32_t> depths = {50};
  const auto before = Bytes(2500, 1), after = Bytes(2500, 2);
  store->Put("ns", prompt, StateKind::kFull, before);
  ASSERT_TRUE(store->Flush(10000));
  const std::string base = RedisStateBases("hearth:", "ns", StateKind::kFull, prompt, depths)[0];
  const std::string slot = std::to_string(RedisKeySlot(base));
  int src = 0;
  while (src < 3 && nodes_[src]->Keys("hearth:*").empty()) ++src;
  ASSERT_LT(src, 3);
  const int dst = (src + 1) % 3;
  const std::string src_id = nodes_[src]->Command({"CLUSTER", "MYID"}).str;
  const std::string dst_id = nodes_[dst]->Command({"CLUSTER", "MYID"}).str;
  ASSERT_EQ(nodes_[dst]->Command({"CLUSTER", "SETSLOT", slot, "IMPORTING", src_id}).str, "OK");
  ASSERT_EQ(nodes_[src]->Command({"CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id}).str, "OK");
  const std::string dst_port = std::to_string(nodes_[dst]->port());
  ASSERT_EQ(nodes_[src]->Command({"MIGRATE", "127.0.0.1", dst_port, base + ":h", "0", "5000"}).str, "OK");

  // The header on the importing node, the chunks still on the migrating one.
  SharedLookup found = store->Find("ns", prompt, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_TRUE(found.hit->bytes == before);

  // Written again with other bytes: chunk keys new to the slot go to the importing node.
  store->Put("ns", prompt, StateKind::kFull, after);
  ASSERT_TRUE(store->Flush(10000));
  EXPECT_EQ(store->stats().write_errors, 0);
  EXPECT_EQ(nodes_[dst]->Keys("hearth:*").size(), 4u);  // the header and 3 chunks
  found = store->Find("ns", prompt, depths, StateKind::kFull);
  ASSERT_TRUE(found.hit) << found.why;
  EXPECT_TRUE(found.hit->bytes == after);
}

}  // namespace
}  // namespace hearth::cache
