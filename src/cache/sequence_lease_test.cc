#include "cache/sequence_lease.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "cache/fake_sequence_store.h"

namespace hearth::cache {
namespace {

class SequenceLeaseTest : public ::testing::Test {
 protected:
  // One sequence: whether it is free shows in whether the cache can lend it again.
  SequenceLeaseTest() : store_(/*recurrent=*/false) {
    CacheConfig c;
    c.needs_partial = false;
    c.sequences = {0};
    cache_ = std::make_unique<PrefixCache>(c, store_, nullptr);
  }

  SequenceLease Lend() {
    std::optional<int32_t> seq = cache_->Lend();
    EXPECT_TRUE(seq.has_value());
    return seq ? SequenceLease(*cache_, *seq) : SequenceLease();
  }
  bool SequenceFree() {
    std::optional<int32_t> seq = cache_->Lend();
    if (seq) cache_->Release(*seq);
    return seq.has_value();
  }

  FakeSequenceStore store_;
  std::unique_ptr<PrefixCache> cache_;
};

TEST_F(SequenceLeaseTest, DestroyedLeaseGivesItsSequenceBackEmpty) {
  {
    SequenceLease lease = Lend();
    ASSERT_TRUE(lease.held());
    store_.Extend(lease.seq(), {1, 2, 3});
    EXPECT_FALSE(SequenceFree());
  }
  EXPECT_TRUE(SequenceFree());
  EXPECT_EQ(store_.Length(0), 0);
  EXPECT_EQ(cache_->CheckInvariants(), "");
}

TEST_F(SequenceLeaseTest, AnExceptionGivesTheSequenceBack) {
  try {
    SequenceLease lease = Lend();
    throw std::runtime_error("a step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(SequenceFree());
}

TEST_F(SequenceLeaseTest, MovedLeaseReturnsItsSequenceOnce) {
  SequenceLease a = Lend();
  SequenceLease b = std::move(a);
  EXPECT_FALSE(a.held());  // NOLINT(bugprone-use-after-move): moved-from holds nothing
  ASSERT_TRUE(b.held());
  a.Release();  // nothing to give back
  EXPECT_FALSE(SequenceFree());
  b.Release();
  EXPECT_FALSE(b.held());
  EXPECT_TRUE(SequenceFree());
}

TEST_F(SequenceLeaseTest, AssigningOverALeaseGivesTheOldSequenceBack) {
  SequenceLease a = Lend();
  a = SequenceLease();
  EXPECT_FALSE(a.held());
  EXPECT_TRUE(SequenceFree());
}

TEST_F(SequenceLeaseTest, AdoptedSequenceStaysCachedAfterTheLeaseIsGone) {
  const std::vector<Token> tokens = {5, 6, 7, 8};
  {
    SequenceLease lease = Lend();
    store_.Extend(lease.seq(), tokens);
    lease.Adopt("m", tokens);
    EXPECT_FALSE(lease.held());
  }
  // Still the cache's, holding the tokens: a request for them resumes with all of them.
  EXPECT_TRUE(cache_->Holds("m", tokens));
  EXPECT_EQ(store_.Length(0), 4);
  EXPECT_EQ(cache_->CheckInvariants(), "");
}

}  // namespace
}  // namespace hearth::cache
