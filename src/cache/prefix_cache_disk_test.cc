// PrefixCache with its disk tier: restarts, key collisions, damaged files.
#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "cache/cache_summary.h"
#include "cache/disk_store.h"
#include "cache/fake_sequence_store.h"
#include "cache/prefix_cache_test_util.h"
#include "cache/state_file.h"
#include "testing/test_env.h"

namespace hearth::cache {
namespace {

class DiskCacheTest : public PrefixCacheTest {
 protected:
  void OpenDisk(size_t budget = 1u << 20, DiskStore::Options options = {}) {
    cache_.reset();
    disk_.reset();  // a clean shutdown finishes the queued writes
    auto d = DiskStore::Open(dir_, budget, "m", options);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    disk_ = std::move(*d);
  }
  std::string dir_ = testing::MakeTempDir() + "/cache";
  std::unique_ptr<DiskStore> disk_;
};

TEST_F(DiskCacheTest, StatesSurviveARestartThroughTheDiskTier) {
  OpenDisk();
  Make(true, 1, /*ram=*/1, disk_.get());  // RAM too small: everything goes to disk
  const Tokens p1 = Range(100, 30), r1 = Range(500, 6);
  Turn(p1, r1, {10, 20});
  Turn(Range(3000, 30), {});  // evicts the first conversation's device sequence
  EXPECT_GT(disk_->bytes(), 0u);
  // Restart: a new store and cache over the same directory.
  OpenDisk();
  ASSERT_FALSE(disk_->Scan().empty());
  Make(true, 1, 1, disk_.get());
  EXPECT_EQ(Turn(Cat(Cat(p1, r1), Range(600, 5)), {}), 36);
  EXPECT_EQ(last_report_.tier, Tier::kDisk);
}

// Two tenants' conversations whose disk keys collide (forced: every key is 0): the file
// under the key holds the other tenant's state, and a resume must not restore it. Turn
// checks that the sequence holds exactly the prompt's prefix.
TEST_F(DiskCacheTest, AStateWhoseDiskKeyCollidesIsNeverRestoredForAnotherConversation) {
  DiskStore::Options options;
  options.key_bits = 0;
  OpenDisk(1u << 20, options);
  Make(true, 1, /*ram=*/1, disk_.get());  // everything goes to disk
  const Tokens pa = Range(100, 30), ra = Range(500, 6);
  Turn(pa, ra, {10, 20}, "m|tenant-a");
  Turn(Range(3000, 30), Range(600, 6), {10, 20}, "m|tenant-b");  // evicts tenant a's sequence
  // Resuming tenant a evicts tenant b's sequence to disk, over tenant a's file.
  EXPECT_EQ(Turn(Cat(Cat(pa, ra), Range(700, 5)), {}, {}, "m|tenant-a"), 0);
  EXPECT_GT(disk_->mismatched(), 0u);
  EXPECT_EQ(disk_->quarantined(), 0u);
}

// Bad files never serve. A truncated file and another model's are quarantined when the
// store opens, and a temporary left by a crashed write is removed. A file whose payload had
// a byte flipped has a sound header, so it is offered: the resume that reads it finds the
// payload's checksum wrong, quarantines the file and restores from what is left instead.
TEST_F(DiskCacheTest, CorruptTruncatedAndForeignFilesAreQuarantinedNeverUsed) {
  OpenDisk();
  Make(true, 1, 1, disk_.get());
  const Tokens p1 = Range(100, 30), r1 = Range(500, 6);
  Turn(p1, r1, {10, 20});
  Turn(Range(3000, 30), {});
  cache_.reset();
  disk_->Flush();
  // Each file by the length of the state it holds (all p1's conversation's: the other's
  // is still on the device).
  std::map<size_t, std::filesystem::path> by_length;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().extension() != ".state") continue;
    std::ifstream in(e.path(), std::ios::binary);
    StateHeader h;
    size_t header_size = 0;
    std::string why;
    ASSERT_TRUE(DecodeStateHeader(in, &h, &header_size, &why)) << e.path() << ": " << why;
    by_length[h.tokens.size()] = e.path();
  }
  ASSERT_EQ(by_length.count(36), 1u) << "p1 + r1's full state is on disk";
  ASSERT_EQ(by_length.count(10), 1u) << "the snapshot at 10 is on disk";
  const std::filesystem::path flipped = by_length[36], truncated = by_length[10];
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) - 3);
  {
    std::fstream f(flipped, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5A));
  }
  std::ofstream(dir_ + "/0000000000000001.state.tmp.99") << "partial write";
  std::filesystem::path foreign;
  {
    auto other = DiskStore::Open(dir_ + "-other", 1u << 20, "other-model");
    ASSERT_TRUE(other.ok());
    auto key = (*other)->Write("other-model", Range(1, 5), StateKind::kPartial, std::vector<uint8_t>(10, 1));
    ASSERT_TRUE(key.ok());
    (*other)->Flush();
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "-other")) {
      if (e.path().extension() != ".state") continue;
      foreign = dir_ + "/" + e.path().filename().string();
      std::filesystem::copy_file(e.path(), foreign);
    }
  }
  ASSERT_FALSE(foreign.empty());
  auto in_quarantine = [&](const std::filesystem::path& p) {
    return std::filesystem::exists(dir_ + "/quarantine/" + p.filename().string()) && !std::filesystem::exists(p);
  };
  OpenDisk();
  EXPECT_EQ(disk_->quarantined(), 2u) << "truncated and foreign files are caught at start";
  EXPECT_TRUE(in_quarantine(truncated));
  EXPECT_TRUE(in_quarantine(foreign));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/0000000000000001.state.tmp.99"));
  EXPECT_TRUE(std::filesystem::exists(flipped)) << "its header is sound: only reading the payload tells";
  Make(true, 1, 1, disk_.get());
  // The resume tries the full state first: its read fails, and what is restored instead
  // must be right (Turn checks warm == cold).
  const int reused = Turn(Cat(Cat(p1, r1), Range(600, 5)), {});
  EXPECT_LT(reused, 36) << "the flipped state was used";
  EXPECT_EQ(disk_->quarantined(), 3u);
  EXPECT_TRUE(in_quarantine(flipped)) << "the bit-flipped payload is quarantined when read";
  size_t n_quarantined = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_ + "/quarantine")) ++n_quarantined;
  EXPECT_EQ(n_quarantined, 3u);
}

// States reach the disk only when the RAM tier evicts them, unless written behind: then a
// restart resumes every conversation, however much RAM there was.
TEST_F(DiskCacheTest, WrittenBehindStatesSurviveARestart) {
  OpenDisk();
  Make(true, 2, /*ram=*/1u << 20, disk_.get());
  const Tokens a = Range(100, 30), ra = Range(500, 6), b = Cat(Range(100, 10), Range(900, 12)), rb = Range(700, 3);
  Turn(a, ra, {10});
  Turn(b, rb, {10});
  disk_->Flush();
  EXPECT_EQ(disk_->bytes(), 0u) << "everything fits in RAM and on the device";
  EXPECT_TRUE(cache_->HasUnwritten());
  EXPECT_EQ(cache_->WriteBehind([] { return true; }), 0) << "stops when told, before the first";
  EXPECT_EQ(cache_->WriteBehind([] { return false; }), 3) << "two device sequences and the snapshot at 10";
  EXPECT_FALSE(cache_->HasUnwritten());
  EXPECT_EQ(cache_->WriteBehind([] { return false; }), 0) << "nothing is written twice";
  EXPECT_EQ(cache_->CheckInvariants(), "");
  OpenDisk();  // restart
  Make(true, 2, 1u << 20, disk_.get());
  EXPECT_EQ(Turn(Cat(Cat(a, ra), Range(40, 4)), {}), 36);
  EXPECT_EQ(last_report_.tier, Tier::kDisk);
  EXPECT_EQ(Turn(Cat(Cat(b, rb), Range(40, 4)), {}), 25);
  EXPECT_EQ(last_report_.tier, Tier::kDisk);
}

// Flips the last byte of every state file in `dir` (their payload checksums now fail).
void CorruptEveryStateFile(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".state") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5A));
  }
}

// A failed disk read forgets its state, which prunes the leaf it hung on and merges the
// stateless fork above it into the other branch. The resume's next candidate is that
// fork: it must still be there to look at (under AddressSanitizer this was a
// heap-use-after-free).
TEST_F(DiskCacheTest, AFailedReadOnABranchingTreeFreesNoNodeTheResumeStillHolds) {
  OpenDisk();
  Make(true, 1, /*ram=*/1, disk_.get());
  const Tokens shared = Range(100, 10);
  const Tokens a = Cat(shared, Range(200, 10)), b = Cat(shared, Range(900, 15));
  Turn(a, {});  // device sequence at 20
  Turn(b, {});  // evicts a to disk (full state); b forks off at 10, a stateless node
  disk_->Flush();
  CorruptEveryStateFile(dir_);  // a's full state: the only file so far
  // a's path again: candidates a (20) then the fork (10). Taking the one sequence moves b
  // to disk too; a's read fails.
  EXPECT_EQ(Turn(Cat(a, Range(50, 5)), {}), 0);
  EXPECT_NE(last_report_.stopped_because.find("failed"), std::string::npos) << last_report_.stopped_because;
  EXPECT_EQ(cache_->CheckInvariants(), "");
  // b's state (written after the corruption) still serves.
  EXPECT_EQ(Turn(Cat(b, Range(60, 3)), {}), 25);
}

}  // namespace
}  // namespace hearth::cache
