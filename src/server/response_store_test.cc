#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace hearth::server {
namespace {

ResponseStore::Stored Turn(const std::string& text) {
  return {.conversation = {api::Message{.role = "user", .content = text}}, .response_json = "{}"};
}

TEST(ResponseStoreTest, FoundOnlyInItsNamespace) {
  ResponseStore store(8, 1 << 20);
  store.Put("alpha", "resp_1", Turn("hello"));
  auto found = store.Find("alpha", "resp_1");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->conversation[0].content, "hello");
  EXPECT_EQ(store.Find("beta", "resp_1"), nullptr) << "another key never reads it";
  EXPECT_EQ(store.Find("alpha", "resp_2"), nullptr);
}

TEST(ResponseStoreTest, EvictsTheLeastRecentlyUsedPastEitherBound) {
  ResponseStore store(2, 1 << 20);
  store.Put("", "a", Turn("1"));
  store.Put("", "b", Turn("2"));
  ASSERT_NE(store.Find("", "a"), nullptr);  // a is now the most recent
  store.Put("", "c", Turn("3"));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_NE(store.Find("", "a"), nullptr);
  EXPECT_EQ(store.Find("", "b"), nullptr) << "the least recently used goes first";
  EXPECT_NE(store.Find("", "c"), nullptr);

  const size_t one = [] {
    ResponseStore probe(8, 1 << 20);
    probe.Put("", "x", Turn(std::string(1000, 'z')));
    return probe.bytes();
  }();
  ResponseStore small(100, 2 * one + one / 2);
  small.Put("", "x", Turn(std::string(1000, 'z')));
  small.Put("", "y", Turn(std::string(1000, 'z')));
  small.Put("", "z", Turn(std::string(1000, 'z')));
  EXPECT_EQ(small.size(), 2u) << "bytes bound the store too";
  EXPECT_LE(small.bytes(), 2 * one + one / 2);
  EXPECT_EQ(small.Find("", "x"), nullptr);
  small.Put("", "huge", Turn(std::string(10 * one, 'z')));
  EXPECT_EQ(small.Find("", "huge"), nullptr) << "a conversation over the bound is not kept";
  EXPECT_EQ(small.size(), 2u) << "and evicts nothing";
}

TEST(ResponseStoreTest, EraseForgetsOnlyItsOwnNamespacesEntry) {
  ResponseStore store(8, 1 << 20);
  store.Put("alpha", "resp_1", Turn("hello"));
  store.Put("beta", "resp_2", Turn("other"));
  const size_t bytes = store.bytes();
  auto held = store.Find("alpha", "resp_1");
  EXPECT_FALSE(store.Erase("beta", "resp_1")) << "another key cannot delete it";
  EXPECT_FALSE(store.Erase("alpha", "resp_2"));
  EXPECT_NE(store.Find("alpha", "resp_1"), nullptr);
  EXPECT_TRUE(store.Erase("alpha", "resp_1"));
  EXPECT_EQ(store.Find("alpha", "resp_1"), nullptr);
  EXPECT_FALSE(store.Erase("alpha", "resp_1")) << "a second delete finds nothing";
  EXPECT_EQ(store.size(), 1u);
  EXPECT_LT(store.bytes(), bytes);
  EXPECT_EQ(held->conversation[0].content, "hello") << "a copy already read stays valid";
  EXPECT_NE(store.Find("beta", "resp_2"), nullptr);
}

TEST(ResponseStoreTest, ResponseObjectsCountTowardTheBytes) {
  ResponseStore small(8, 1000);
  ResponseStore::Stored big = Turn("x");
  big.response_json = std::string(2000, 'j');
  small.Put("", "a", big);
  EXPECT_EQ(small.Find("", "a"), nullptr);
}

}  // namespace
}  // namespace hearth::server
