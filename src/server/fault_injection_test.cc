// Fault injection on a branching tree, on the tiny hybrid model: three conversations share
// a system prompt, and each tier (device, RAM, disk) holds their states in turn while the
// engine's context (testing/faulty_sequence_store.h) or the disk
// (testing/faulty_file_system.h) fails on command. Whatever fails, the cache keeps
// serving, recomputes what it cannot restore, and never serves a wrong state: the logits
// after every prompt equal a full recompute's. The resume report says what happened.
// docs/reliability.md ("Fault injection") has the matrix these tests fill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cache/disk_store.h"
#include "cache/prefix_cache.h"
#include "cache/state_file.h"
#include "engine/context.h"
#include "server/context_sequence_store.h"
#include "testing/faulty_file_system.h"
#include "testing/faulty_sequence_store.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using engine::Token;
using testing::FileFault;
using testing::StoreFault;
using testing::RandomTokens;
using testing::Concat;

enum class Where { kDevice, kRam, kDisk };

class FaultInjectionTest : public ::testing::Test {
 protected:
  // Warm equals cold within the tolerance of the context's attention (test_env.h).
  ::testing::AssertionResult Close(const std::vector<float>& a, const std::vector<float>& b) const {
    return testing::LogitsClose(a, b, ctx_->flash_attn());
  }

  static constexpr int kSystem = 64;  // the shared system prompt; a snapshot ends it

  void SetUp() override {
    model_ = testing::LoadTestModel("qwen35");
    ASSERT_NE(model_, nullptr);
  }
  void TearDown() override { Stop(); }
  void Stop() {
    cache_.reset();
    disk_.reset();
  }

  // A fresh context and cache whose states end up in `where`: the device (sequences
  // enough for every conversation), RAM (one sequence: each conversation moves the last
  // to RAM) or disk (one sequence and no RAM: straight to disk).
  void Start(Where where) {
    Stop();
    const int n_seqs = where == Where::kDevice ? 4 : 1;
    engine::ContextOptions o;
    o.n_ctx = 2048;
    o.n_batch = 256;
    o.n_ubatch = 256;
    o.n_seq_max = n_seqs + 1;  // the last one computes cold references
    o.n_threads = 1;
    auto c = engine::Context::Create(*model_, o);
    ASSERT_TRUE(c.ok());
    ctx_ = std::move(*c);
    store_ = std::make_unique<ContextSequenceStore>(*ctx_);
    faulty_store_ = std::make_unique<testing::FaultySequenceStore>(*store_);
    if (where == Where::kDisk) {
      cache::DiskStore::Options d;
      d.file_system = &faulty_fs_;
      auto disk = cache::DiskStore::Open(dir_, 1u << 30, "ns", d);
      ASSERT_TRUE(disk.ok()) << disk.status().ToString();
      disk_ = std::move(*disk);
    }
    cache::CacheConfig cc;
    for (int i = 0; i < n_seqs; ++i) cc.sequences.push_back(i);
    cc.ram_budget_bytes = where == Where::kDisk ? 1 : 256u << 20;
    cache_ = std::make_unique<cache::PrefixCache>(cc, *faulty_store_, disk_.get());
    cold_seq_ = n_seqs;
  }

  // One request: resume, prefill the rest (a snapshot at the system prompt's end),
  // decode `reply`, give the sequence back. Checks warm against cold on the way.
  void Turn(const std::vector<Token>& prompt, const std::vector<Token>& reply = {}) {
    auto lease = cache_->Acquire("ns", prompt, static_cast<int32_t>(prompt.size()) - 1);
    ASSERT_TRUE(lease.has_value());
    report_ = lease->report;
    const int seq = lease->seq;
    size_t done = static_cast<size_t>(report_.n_reused);
    ASSERT_EQ(ctx_->SeqLength(seq), static_cast<engine::Pos>(done)) << "the sequence holds what the report says";
    if (done < kSystem) {
      ASSERT_TRUE(ctx_->Prefill(seq, std::span(prompt).subspan(done, kSystem - done), 0, false).ok());
      done = kSystem;
      cache_->SnapshotPartial("ns", seq, std::span(prompt).subspan(0, kSystem));
    }
    ASSERT_TRUE(ctx_->Prefill(seq, std::span(prompt).subspan(done), 0, true).ok());
    auto l = ctx_->Logits(ctx_->LastPrefillIndex());
    const std::vector<float> warm(l.begin(), l.end());
    if (!reply.empty()) {
      ASSERT_TRUE(ctx_->Prefill(seq, reply, 0, false).ok());
    }
    cache_->Adopt("ns", seq, Concat(prompt, reply));
    if (disk_) disk_->Flush();  // reads then come from files, where the faults are
    ASSERT_EQ(cache_->CheckInvariants(), "");
    EXPECT_TRUE(Close(Cold(prompt), warm)) << "reused " << report_.n_reused;
  }

  std::vector<float> Cold(const std::vector<Token>& prompt) {
    ctx_->ClearSeq(cold_seq_);
    EXPECT_TRUE(ctx_->Prefill(cold_seq_, prompt, 0, true).ok());
    auto l = ctx_->Logits(ctx_->LastPrefillIndex());
    std::vector<float> out(l.begin(), l.end());
    ctx_->ClearSeq(cold_seq_);
    return out;
  }

  // Three conversations on one system prompt: A (with a reply), B, then C, which in the
  // RAM and disk set-ups moves B's state down a tier.
  void Branch() {
    Turn(a_, reply_);
    Turn(b_);
    Turn(c_);
  }
  // A's follow-up: the whole of A, its reply and a new message.
  std::vector<Token> FollowUp() const { return Concat(Concat(a_, reply_), RandomTokens(12, 9)); }
  // B's follow-up.
  std::vector<Token> FollowUpB() const { return Concat(b_, RandomTokens(12, 10)); }
  // A fork of the system prompt.
  std::vector<Token> Fork() const { return Concat(system_, RandomTokens(20, 11)); }

  size_t FilesIn(const std::string& dir) const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
    return n;
  }
  // The state file in dir_ whose header holds exactly `tokens`; empty when none does.
  std::string StateFileHolding(const std::vector<Token>& tokens) const {
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.path().extension() != ".state") continue;
      std::ifstream in(e.path(), std::ios::binary);
      cache::StateHeader h;
      size_t header_size = 0;
      std::string why;
      if (cache::DecodeStateHeader(in, &h, &header_size, &why) && h.tokens == tokens) return e.path().string();
    }
    return "";
  }

  const engine::Model* model_ = nullptr;
  std::string dir_ = testing::MakeTempDir() + "/disk";
  testing::FaultyFileSystem faulty_fs_;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<ContextSequenceStore> store_;
  std::unique_ptr<testing::FaultySequenceStore> faulty_store_;
  std::unique_ptr<cache::DiskStore> disk_;
  std::unique_ptr<cache::PrefixCache> cache_;
  int cold_seq_ = 0;
  cache::ResumeReport report_;

  const std::vector<Token> system_ = RandomTokens(kSystem, 1);
  const std::vector<Token> a_ = Concat(system_, RandomTokens(40, 2));
  const std::vector<Token> reply_ = RandomTokens(8, 3);
  const std::vector<Token> b_ = Concat(system_, RandomTokens(40, 4));
  const std::vector<Token> c_ = Concat(system_, RandomTokens(40, 5));
};

// ---- Device: the states are idle context sequences.

// A fork needs the system prompt's partial state restored onto KV copied from a cached
// sequence; when that restore fails the fork is recomputed, and the cache serves on.
TEST_F(FaultInjectionTest, DeviceForkWhosePartialRestoreFailsIsRecomputed) {
  Start(Where::kDevice);
  Branch();
  faulty_store_->Inject(StoreFault::kRestoreError);
  Turn(Fork());
  EXPECT_EQ(faulty_store_->fired(StoreFault::kRestoreError), 1);
  EXPECT_EQ(report_.n_reused, 0);
  EXPECT_NE(report_.stopped_because.find("restore at 64 failed: cannot restore the state (injected)"), std::string::npos)
      << report_.stopped_because;
  Turn(FollowUp());
  EXPECT_EQ(report_.n_reused, static_cast<int>(a_.size() + reply_.size())) << "A's own sequence is untouched";
}

// A cached sequence evicted when its state cannot be saved is lost, not half-kept: its
// follow-up resumes from the system prompt's snapshot.
TEST_F(FaultInjectionTest, DeviceSequenceWhoseEvictionCannotSaveIsRecomputedFromTheSnapshot) {
  Start(Where::kRam);  // one sequence: B's request evicts A
  Turn(a_, reply_);
  faulty_store_->Inject(StoreFault::kSaveError, 1, /*whole_only=*/true);
  Turn(b_);
  EXPECT_EQ(faulty_store_->fired(StoreFault::kSaveError), 1);
  Turn(FollowUp());
  EXPECT_EQ(report_.n_reused, kSystem);
}

// ---- RAM: the states are serialized in host memory.

TEST_F(FaultInjectionTest, RamStateThatFailsToRestoreIsRecomputedAndDropped) {
  Start(Where::kRam);
  Branch();
  faulty_store_->Inject(StoreFault::kRestoreError, 1, /*whole_only=*/true);
  Turn(FollowUp());
  EXPECT_EQ(faulty_store_->fired(StoreFault::kRestoreError), 1);
  EXPECT_EQ(report_.n_reused, kSystem) << report_.stopped_because;
  EXPECT_NE(report_.stopped_because.find("cannot restore the state (injected)"), std::string::npos)
      << report_.stopped_because;
  Turn(FollowUpB());
  EXPECT_EQ(report_.n_reused, static_cast<int>(b_.size())) << "the sibling's state still serves";
}

// A state damaged on its way to RAM (half its bytes) is refused by the context, never
// restored as it is; the refusal drops it, so later requests do not fail on it again.
TEST_F(FaultInjectionTest, TruncatedRamStateIsRefusedOnceAndDropped) {
  Start(Where::kRam);
  Turn(a_, reply_);
  faulty_store_->Inject(StoreFault::kTruncatedSave, 1, /*whole_only=*/true);
  // B's request evicts A to RAM (truncated on the way), then resumes at the system
  // prompt with A's state as the attention part: the context refuses it, B recomputes.
  Turn(b_);
  EXPECT_EQ(faulty_store_->fired(StoreFault::kTruncatedSave), 1);
  EXPECT_EQ(report_.n_reused, 0);
  EXPECT_NE(report_.stopped_because.find("restore at 64 failed"), std::string::npos) << report_.stopped_because;
  Turn(c_);
  EXPECT_EQ(report_.n_reused, kSystem);
  Turn(FollowUp());  // A's state is gone: nothing fails again on its path
  EXPECT_EQ(report_.n_reused, kSystem);
  EXPECT_EQ(report_.stopped_because.find("failed"), std::string::npos)
      << "the refused state was tried again: " << report_.stopped_because;
}

TEST_F(FaultInjectionTest, SlowRamRestoreServesTheRightStateLate) {
  Start(Where::kRam);
  Branch();
  faulty_store_->slow_restore = std::chrono::milliseconds(200);
  faulty_store_->Inject(StoreFault::kSlowRestore, 1, /*whole_only=*/true);
  Turn(FollowUp());
  EXPECT_EQ(report_.n_reused, static_cast<int>(a_.size() + reply_.size()));
  EXPECT_EQ(report_.tier, cache::Tier::kRam);
  EXPECT_GE(report_.restore_ms, 200.0) << "the report shows where the time went";
}

// ---- Disk: the states are files.

TEST_F(FaultInjectionTest, DiskReadErrorIsRecomputedAndTheFileKept) {
  Start(Where::kDisk);
  Branch();
  const size_t files = FilesIn(dir_);
  faulty_fs_.Inject(FileFault::kReadError);
  Turn(FollowUp());
  EXPECT_EQ(faulty_fs_.fired(FileFault::kReadError), 1);
  EXPECT_EQ(report_.n_reused, kSystem) << report_.stopped_because;
  EXPECT_NE(report_.stopped_because.find("Input/output error (injected)"), std::string::npos) << report_.stopped_because;
  EXPECT_EQ(cache_->stats().disk_read_errors, 1);
  EXPECT_EQ(cache_->stats().snapshots_quarantined, 0);
  EXPECT_GE(FilesIn(dir_), files) << "an unreadable file is not deleted: it may read after a restart";
  Turn(FollowUpB());
  EXPECT_EQ(report_.n_reused, static_cast<int>(b_.size()));
  EXPECT_EQ(report_.tier, cache::Tier::kDisk);
}

// A write the disk refuses (I/O error, or full) loses that state only: its follow-up
// recomputes from the system prompt's snapshot, the rest serves from disk.
TEST_F(FaultInjectionTest, DiskWriteErrorAndDiskFullLoseOnlyThatState) {
  for (FileFault f : {FileFault::kWriteError, FileFault::kDiskFull}) {
    SCOPED_TRACE(testing::FileFaultName(f));
    Stop();
    std::filesystem::remove_all(dir_);
    Start(Where::kDisk);
    Turn(a_, reply_);
    faulty_fs_.Inject(f);
    Turn(b_);  // A's full state goes to disk and fails
    Turn(c_);
    EXPECT_EQ(faulty_fs_.fired(f), 1);
    EXPECT_EQ(cache_->stats().disk_write_errors, 1);
    Turn(FollowUp());
    EXPECT_EQ(report_.n_reused, kSystem);
    Turn(FollowUpB());
    EXPECT_EQ(report_.n_reused, static_cast<int>(b_.size()));
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "a partial write stays: " << e.path();
    }
  }
}

// A file cut short or bit-flipped after it was written is quarantined, never restored.
// The test damages A's file itself once every turn has written and read what it needs:
// a fault at the rename (cache/disk_faults_test.cc) would race B's resume, which reads
// A's state either from the writer's queue or from the file it has just renamed.
TEST_F(FaultInjectionTest, DiskFileTruncatedOrFlippedIsQuarantinedAndRecomputed) {
  for (FileFault f : {FileFault::kTruncate, FileFault::kFlipBit}) {
    SCOPED_TRACE(testing::FileFaultName(f));
    Stop();
    std::filesystem::remove_all(dir_);
    Start(Where::kDisk);
    Branch();
    const std::string a_file = StateFileHolding(Concat(a_, reply_));
    ASSERT_FALSE(a_file.empty()) << "A's state went to disk";
    testing::FaultyFileSystem::Damage(a_file, f);
    Turn(FollowUp());
    EXPECT_EQ(report_.n_reused, kSystem) << report_.stopped_because;
    EXPECT_NE(report_.stopped_because.find("corrupt"), std::string::npos) << report_.stopped_because;
    EXPECT_EQ(cache_->stats().snapshots_quarantined, 1);
    EXPECT_EQ(FilesIn(dir_ + "/quarantine"), 1u);
  }
}

TEST_F(FaultInjectionTest, SlowDiskReadServesTheRightStateLate) {
  Start(Where::kDisk);
  Branch();
  faulty_fs_.slow_read = std::chrono::milliseconds(200);
  faulty_fs_.Inject(FileFault::kSlowRead);
  Turn(FollowUp());
  EXPECT_EQ(report_.n_reused, static_cast<int>(a_.size() + reply_.size()));
  EXPECT_EQ(report_.tier, cache::Tier::kDisk);
  EXPECT_GE(report_.restore_ms, 200.0);
}

// A restart on a directory where one file reads with an I/O error: that file is skipped
// (not quarantined), everything else resumes, and the next start finds it again.
TEST_F(FaultInjectionTest, DiskReadErrorAtStartUpSkipsOnlyThatFile) {
  Start(Where::kDisk);
  Branch();
  Stop();
  const size_t files = FilesIn(dir_);
  ASSERT_GE(files, 3u);
  faulty_fs_.Inject(FileFault::kReadError);
  Start(Where::kDisk);
  EXPECT_EQ(cache_->stats().disk_read_errors, 1);
  EXPECT_EQ(cache_->stats().n_states, files - 1) << "one state per file but the unreadable one";
  Turn(FollowUp());
  Turn(Fork());
  Stop();
  Start(Where::kDisk);
  EXPECT_EQ(cache_->stats().disk_read_errors, 0);
  EXPECT_EQ(cache_->stats().n_states, FilesIn(dir_)) << "the file skipped once is found again";
  EXPECT_EQ(cache_->stats().snapshots_quarantined, 0);
}

}  // namespace
}  // namespace hearth::server
