#include "cache/disk_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "testing/test_env.h"

namespace hearth::cache {
namespace {

// Writes go to a writer thread: whether a state is still queued, being written or on
// disk, it reads back whole, and a removed one never stays on disk.
TEST(DiskStoreTest, QueuedWritesReadBackAndRemovedOnesLeaveNoFile) {
  const std::string dir = testing::MakeTempDir() + "/store";
  auto store = DiskStore::Open(dir, 256u << 20, "ns");
  ASSERT_TRUE(store.ok());
  std::vector<uint64_t> keys;
  for (int i = 0; i < 24; ++i) {
    std::vector<uint8_t> bytes(static_cast<size_t>(1 << 20) + static_cast<size_t>(i), static_cast<uint8_t>(i));
    auto key = (*store)->Write("ns", std::vector<Token>{i, i + 1}, StateKind::kPartial, bytes);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    keys.push_back(*key);
    auto back = (*store)->Read(*key);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, bytes);
  }
  std::set<std::string> kept;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i % 2 == 0) {
      (*store)->Remove(keys[i]);
    } else {
      char name[32];
      std::snprintf(name, sizeof(name), "%016llx.state", static_cast<unsigned long long>(keys[i]));
      kept.insert(name);
    }
  }
  (*store)->Flush();
  std::set<std::string> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) on_disk.insert(e.path().filename().string());
  }
  EXPECT_EQ(on_disk, kept);
  // A restart finds exactly those, intact.
  store->reset();
  auto again = DiskStore::Open(dir, 256u << 20, "ns");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Scan().size(), kept.size());
  for (const auto& e : (*again)->Scan()) {
    auto back = (*again)->Read(e.key);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->size(), (1u << 20) + static_cast<size_t>(e.tokens[0]));
  }
}

}  // namespace
}  // namespace hearth::cache
