// The disk store under injected faults (testing/faulty_file_system.h): what each fault
// leaves on disk, in the store's accounting and in what Read returns.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cache/disk_store.h"
#include "testing/faulty_file_system.h"
#include "testing/test_env.h"

namespace hearth::cache {
namespace {

namespace fs = std::filesystem;
using testing::FaultyFileSystem;
using testing::FileFault;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class DiskFaultsTest : public ::testing::Test {
 protected:
  void Open(size_t budget) {
    store_.reset();
    DiskStore::Options o;
    o.file_system = &faulty_;
    auto s = DiskStore::Open(dir_, budget, "ns", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  uint64_t Put(Token t, size_t n) {
    auto key = store_->Write("ns", Tokens(t), StateKind::kFull, Bytes(t, n));
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    store_->Flush();
    return key.ok() ? *key : 0;
  }
  StatusOr<std::vector<uint8_t>> Get(uint64_t key, Token t) { return store_->Read(key, "ns", Tokens(t), StateKind::kFull); }
  static std::vector<Token> Tokens(Token t) { return {t, t + 1, t + 2}; }
  static std::vector<uint8_t> Bytes(Token t, size_t n) { return std::vector<uint8_t>(n, static_cast<uint8_t>(t)); }

  std::string dir_ = testing::MakeTempDir() + "/store";
  FaultyFileSystem faulty_;
  std::unique_ptr<DiskStore> store_;
};

// A write the disk refused (full, or an I/O error) leaves no file and no temporary, and
// its bytes stop counting against the budget: counted, they made the next writes evict
// sound files for a file that was never there.
TEST_F(DiskFaultsTest, AFailedWriteLeavesNothingAndCostsNoSoundFile) {
  Open(2 * 1100);  // room for two files of 1000 bytes and their headers
  const uint64_t a = Put(1, 1000);
  faulty_.Inject(FileFault::kDiskFull);
  const uint64_t b = Put(2, 1000);
  faulty_.Inject(FileFault::kWriteError);
  const uint64_t c = Put(3, 1000);
  EXPECT_EQ(faulty_.fired(FileFault::kDiskFull), 1);
  EXPECT_EQ(store_->write_errors(), 2u);
  EXPECT_EQ(Get(b, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Get(c, 3).status().code(), StatusCode::kNotFound);
  const uint64_t d = Put(4, 1000);
  auto back = Get(a, 1);
  ASSERT_TRUE(back.ok()) << "a sound file was evicted for failed writes: " << back.status().ToString();
  EXPECT_EQ(*back, Bytes(1, 1000));
  ASSERT_TRUE(Get(d, 4).ok());
  char a_name[32], d_name[32];
  std::snprintf(a_name, sizeof(a_name), "%016llx.state", static_cast<unsigned long long>(a));
  std::snprintf(d_name, sizeof(d_name), "%016llx.state", static_cast<unsigned long long>(d));
  EXPECT_EQ(FilesIn(dir_), (std::vector<std::string>{std::min<std::string>(a_name, d_name), std::max<std::string>(a_name, d_name)}))
      << "no temporary or partial file stays";
}

// The failed write's key reaches the caller through evicted() at the next Write, so the
// cache forgets the state at once instead of at its first read.
TEST_F(DiskFaultsTest, AFailedWriteIsListedAsEvictedAtTheNextWrite) {
  Open(1u << 20);
  faulty_.Inject(FileFault::kWriteError);
  const uint64_t a = Put(1, 100);
  const uint64_t b = Put(2, 100);
  EXPECT_EQ(store_->evicted(), std::vector<uint64_t>{a});
  const auto files = FilesIn(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(store_->bytes(), fs::file_size(dir_ + "/" + files[0])) << "only the file written counts";
  EXPECT_TRUE(Get(b, 2).ok());
}

// An I/O error on read is not corruption: nothing is returned, the file is neither
// quarantined nor deleted, and it reads back once the disk answers again.
TEST_F(DiskFaultsTest, AReadErrorKeepsTheFileAndQuarantinesNothing) {
  Open(1u << 20);
  const uint64_t a = Put(1, 5000);
  faulty_.Inject(FileFault::kReadError);
  auto failed = Get(a, 1);
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable) << failed.status().ToString();
  EXPECT_EQ(store_->read_errors(), 1u);
  EXPECT_EQ(store_->quarantined(), 0u);
  EXPECT_TRUE(FilesIn(dir_ + "/quarantine").empty());
  auto back = Get(a, 1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Bytes(1, 5000));
  // At start-up too: an unreadable file is skipped, not quarantined, and found next time.
  faulty_.Inject(FileFault::kReadError);
  Open(1u << 20);
  EXPECT_TRUE(store_->Scan().empty());
  EXPECT_EQ(store_->quarantined(), 0u);
  Open(1u << 20);
  EXPECT_EQ(store_->Scan().size(), 1u);
}

// A file damaged between write and read (cut short, or a bit flipped in its payload) is
// never served: quarantined, and Read says the data was lost.
TEST_F(DiskFaultsTest, TruncatedAndBitFlippedFilesAreQuarantinedNeverServed) {
  Open(1u << 20);
  for (FileFault f : {FileFault::kTruncate, FileFault::kFlipBit}) {
    faulty_.Inject(f);
    const Token t = f == FileFault::kTruncate ? 1 : 2;
    const uint64_t key = Put(t, 5000);
    EXPECT_EQ(faulty_.fired(f), 1) << testing::FileFaultName(f);
    EXPECT_EQ(Get(key, t).status().code(), StatusCode::kDataLoss) << testing::FileFaultName(f);
  }
  EXPECT_EQ(store_->quarantined(), 2u);
  EXPECT_EQ(FilesIn(dir_ + "/quarantine").size(), 2u);
  EXPECT_TRUE(FilesIn(dir_).empty());
}

// A slow disk delays the read by as much and changes nothing else.
TEST_F(DiskFaultsTest, ASlowReadReturnsTheRightBytesLate) {
  Open(1u << 20);
  const uint64_t a = Put(1, 5000);
  faulty_.slow_read = std::chrono::milliseconds(200);
  faulty_.Inject(FileFault::kSlowRead);
  const auto t0 = std::chrono::steady_clock::now();
  auto back = Get(a, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, Bytes(1, 5000));
}

// A directory no file can be written to fails Open (the caller then runs without the
// tier) rather than failing every write later. Root writes through chmod, so as root
// the read-only directory is simulated by the file system refusing the write.
TEST_F(DiskFaultsTest, OpenRefusesADirectoryThatCannotTakeAFile) {
  // A path under a regular file: no directory can be made there, root or not.
  const std::string file = testing::MakeTempDir() + "/plain-file";
  std::ofstream(file) << "x";
  EXPECT_EQ(DiskStore::Open(file + "/cache", 1u << 20, "ns").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(DiskStore::Open(file, 1u << 20, "ns").status().code(), StatusCode::kUnavailable);

  // Read-only.
  fs::create_directories(dir_ + "/quarantine");
  DiskStore::Options o;
  if (::geteuid() == 0) {
    faulty_.Inject(FileFault::kWriteError);
    o.file_system = &faulty_;
  } else {
    ASSERT_EQ(::chmod(dir_.c_str(), 0500), 0);
  }
  auto ro = DiskStore::Open(dir_, 1u << 20, "ns", o);
  ::chmod(dir_.c_str(), 0700);
  EXPECT_EQ(ro.status().code(), StatusCode::kUnavailable) << (ro.ok() ? "opened" : ro.status().ToString());
  EXPECT_EQ(FilesIn(dir_), std::vector<std::string>{}) << "the probe leaves nothing behind";

  // Full.
  faulty_.Inject(FileFault::kDiskFull);
  o.file_system = &faulty_;
  auto full = DiskStore::Open(dir_, 1u << 20, "ns", o);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted) << (full.ok() ? "opened" : full.status().ToString());
  EXPECT_EQ(FilesIn(dir_), std::vector<std::string>{});
}

}  // namespace
}  // namespace hearth::cache
