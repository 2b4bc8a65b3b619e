#include "api/ids.h"

#include <gtest/gtest.h>

#include <set>

namespace hearth::api {
namespace {

TEST(IdsTest, PrefixThenTwentyFourAlphanumerics) {
  std::string id = NewId("chatcmpl-");
  ASSERT_EQ(id.size(), 9u + 24u);
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  for (char c : id.substr(9)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
}

TEST(IdsTest, DoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(NewId("toolu_"));
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace hearth::api
