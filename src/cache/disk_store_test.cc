#include "cache/disk_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
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
    const std::vector<Token> tokens{i, i + 1};
    auto key = (*store)->Write("ns", tokens, StateKind::kPartial, bytes);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    keys.push_back(*key);
    auto back = (*store)->Read(*key, "ns", tokens, StateKind::kPartial);
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
    auto back = (*again)->Read(e.key, e.ns, e.tokens, e.kind);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->size(), (1u << 20) + static_cast<size_t>(e.tokens[0]));
  }
}


// A state file's header holds its conversation's tokens: only the server's user reads it.
TEST(DiskStoreTest, StateFilesArePrivate) {
  const std::string dir = testing::MakeTempDir() + "/store";
  auto store = DiskStore::Open(dir, 1u << 20, "m");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Write("m", std::vector<Token>{1, 2}, StateKind::kFull, std::vector<uint8_t>(10, 1)).ok());
  (*store)->Flush();
  int n_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    struct stat st = {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
    ++n_files;
  }
  EXPECT_EQ(n_files, 1);
}

// Keys are 64-bit hashes, so a file may hold another state than the one asked for. Here
// every key is forced to collide: a Read for any other namespace, token path or kind than
// the holder's is refused, whether the holder is still queued or on disk, and the holder
// itself still reads back.
TEST(DiskStoreTest, AReadNeverServesAnotherStateWhoseKeyCollides) {
  DiskStore::Options options;
  options.key_bits = 0;  // every state's key is 0
  auto store = DiskStore::Open(testing::MakeTempDir() + "/store", 1u << 20, "m", options);
  ASSERT_TRUE(store.ok());
  const std::vector<Token> tokens{1, 2, 3};
  const std::vector<uint8_t> bytes(100, 0xB);
  auto key = (*store)->Write("m|tenant-b", tokens, StateKind::kFull, bytes);
  ASSERT_TRUE(key.ok());
  struct Asked {
    std::string ns;
    std::vector<Token> tokens;
    StateKind kind;
  };
  const std::vector<Asked> others = {{"m|tenant-a", tokens, StateKind::kFull},
                                     {"m|tenant-b", {1, 2, 4}, StateKind::kFull},
                                     {"m|tenant-b", {1, 2}, StateKind::kFull},
                                     {"m|tenant-b", tokens, StateKind::kPartial}};
  for (bool on_disk : {false, true}) {
    if (on_disk) (*store)->Flush();
    for (const Asked& a : others) {
      auto got = (*store)->Read(*key, a.ns, a.tokens, a.kind);
      EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << a.ns << " on disk: " << on_disk;
    }
    auto own = (*store)->Read(*key, "m|tenant-b", tokens, StateKind::kFull);
    ASSERT_TRUE(own.ok()) << own.status().ToString();
    EXPECT_EQ(*own, bytes);
  }
  EXPECT_EQ((*store)->mismatched(), 2 * others.size());
  EXPECT_EQ((*store)->quarantined(), 0u) << "a sound file of another state is not bad";
}

// Bad files are kept for a person to examine, but never more than the limits: the oldest
// go first, and the newest stays even when it alone is over the byte limit.
TEST(DiskStoreTest, QuarantineKeepsOnlyTheNewestBadFiles) {
  const std::string dir = testing::MakeTempDir() + "/store";
  DiskStore::Options options;
  options.quarantine_files = 3;
  options.quarantine_bytes = 1000;
  auto quarantined = [&] {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/quarantine")) names.insert(e.path().filename().string());
    return names;
  };
  // One bad file per start, each found and quarantined by that start.
  auto start_with_bad_file = [&](const std::string& name, size_t size) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/" + name) << std::string(size, 'x');
    auto store = DiskStore::Open(dir, 1u << 20, "m", options);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ((*store)->quarantined(), 1u);
  };
  for (int i = 1; i <= 5; ++i) start_with_bad_file("000000000000000" + std::to_string(i) + ".state", 100);
  EXPECT_EQ(quarantined(), (std::set<std::string>{"0000000000000003.state", "0000000000000004.state",
                                                  "0000000000000005.state"}));
  start_with_bad_file("0000000000000006.state", 600);
  EXPECT_EQ(quarantined(), (std::set<std::string>{"0000000000000004.state", "0000000000000005.state",
                                                  "0000000000000006.state"}));  // 800 bytes
  start_with_bad_file("0000000000000007.state", 600);
  EXPECT_EQ(quarantined(), (std::set<std::string>{"0000000000000007.state"}));  // 1200 would be over
  start_with_bad_file("0000000000000008.state", 5000);
  EXPECT_EQ(quarantined(), (std::set<std::string>{"0000000000000008.state"}));
}

}  // namespace
}  // namespace hearth::cache
