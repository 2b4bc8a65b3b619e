#include "server/request_log.h"

#include <gtest/gtest.h>

namespace hearth::server {
namespace {

RequestRecord Record(const std::string& ns, int n_prompt) {
  RequestRecord r;
  r.ns = ns;
  r.n_prompt = n_prompt;
  return r;
}

TEST(RequestLogTest, KeepsTheNewestInOrderWithinItsCapacity) {
  RequestLog log;
  for (int i = 1; i <= static_cast<int>(RequestLog::kCapacity) + 5; ++i) log.Add(Record("m|a", i));
  const auto all = log.Recent();
  ASSERT_EQ(all.size(), RequestLog::kCapacity);
  EXPECT_EQ(all.front().id, 6) << "the five oldest went";
  EXPECT_EQ(all.front().n_prompt, 6);
  EXPECT_EQ(all.back().id, static_cast<int64_t>(RequestLog::kCapacity) + 5);
}

TEST(RequestLogTest, AViewHoldsOnlyItsOwnNamespaces) {
  RequestLog log;
  log.Add(Record("m|key-a|", 1));
  log.Add(Record("m|key-b|", 2));
  log.Add(Record("m|key-a|salt", 3));
  const auto a = log.Recent([](const std::string& ns) { return ns.starts_with("m|key-a|"); });
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].n_prompt, 1);
  EXPECT_EQ(a[1].n_prompt, 3);
}

// Prefilled tokens split into those the tree knew without a usable state, and new ones.
TEST(RequestLogTest, PrefilledSplitsIntoRecomputedAndNew) {
  RequestRecord r;
  r.n_prompt = 100;
  r.n_reused = 40;
  r.n_matched = 70;
  r.n_prefilled = 60;
  EXPECT_EQ(r.n_recomputed(), 30);
  EXPECT_EQ(r.n_new(), 30);
  r.n_prefilled = 10;  // cut off during its prefill
  EXPECT_EQ(r.n_recomputed(), 10);
  EXPECT_EQ(r.n_new(), 0);
  r.n_matched = 20;  // reused more than the tree matched: nothing recomputed
  r.n_prefilled = 60;
  EXPECT_EQ(r.n_recomputed(), 0);
  EXPECT_EQ(r.n_new(), 60);
}

}  // namespace
}  // namespace hearth::server
