#include "base/utf8.h"

#include <gtest/gtest.h>

namespace hearth {
namespace {

TEST(Utf8Test, CompletePrefixHoldsBackOpenSequences) {
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8"), 1u);           // 3-byte char missing its last byte
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8\x96"), 4u);       // complete
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x99"), 0u);        // 4-byte char cut short
  EXPECT_EQ(CompleteUtf8Prefix("x\xC3"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("x\xFF"), 2u) << "an invalid byte will not become valid by waiting";
}

TEST(Utf8Test, ValidityRejectsOverlongsSurrogatesAndTruncation) {
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9 \xF0\x9F\x99\x82"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("abc\xE4\xB8"));       // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Utf8Test, SanitizeReplacesEachIllFormedRunOnce) {
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("a\xF0\x9F" "b"), "a\xEF\xBF\xBD" "b") << "a cut-short character is one replacement";
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD") << "overlong lead bytes are never valid";
  EXPECT_EQ(SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xE4\xB8 \xC0\xAF \xF0")));
}

}  // namespace
}  // namespace hearth
