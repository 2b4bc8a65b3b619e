#include "api/json_fields.h"

#include <gtest/gtest.h>

namespace hearth::api {
namespace {

TEST(JsonFieldsTest, DepthLimitIsExact) {
  auto arrays = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  auto objects = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += R"({"k":)";
    return s + "1" + std::string(depth, '}');
  };
  EXPECT_TRUE(ParseJson(arrays(kMaxJsonDepth)).ok());
  EXPECT_TRUE(ParseJson(objects(kMaxJsonDepth)).ok());
  EXPECT_FALSE(ParseJson(objects(kMaxJsonDepth + 1)).ok());
  ParseResult<Json> too_deep = ParseJson(arrays(kMaxJsonDepth + 1));
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().message, "nests deeper than 128 levels");
}

// A key twice in one object is refused at any depth (readers disagree on which counts);
// the same key in two objects is fine.
TEST(JsonFieldsTest, DuplicateKeysAreRefused) {
  EXPECT_TRUE(ParseJson(R"({"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]})").ok());
  ParseResult<Json> top = ParseJson(R"({"max_tokens":2,"max_tokens":99})");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().http_status, 400);
  EXPECT_EQ(top.error().message, R"(has the key "max_tokens" more than once in one object)");
  EXPECT_FALSE(ParseJson(R"({"m":[{"role":"user","role":"system"}]})").ok());
  EXPECT_FALSE(ParseJson(R"([{"a":{"b":1,"c":{},"b":null}}])").ok());
  ParseResult<Json> long_key = ParseJson("{\"" + std::string(200, 'k') + "\":1,\"" + std::string(200, 'k') + "\":1}");
  ASSERT_FALSE(long_key.ok());
  EXPECT_EQ(long_key.error().message, "has the key \"" + std::string(64, 'k') + "...\" more than once in one object");
}

TEST(JsonFieldsTest, IntegersAcceptIntegralFloatsOnly) {
  Json obj = Json::parse(R"({"a":3.0,"b":3.5,"c":"3","d":-4,"e":1e300,"f":18446744073709551615})");
  std::optional<int64_t> v;
  EXPECT_FALSE(ReadInt(obj, "a", 0, 10, &v));
  EXPECT_EQ(v, 3);
  EXPECT_TRUE(ReadInt(obj, "b", 0, 10, &v));
  EXPECT_TRUE(ReadInt(obj, "c", 0, 10, &v));
  EXPECT_TRUE(ReadInt(obj, "d", 0, 10, &v));
  EXPECT_TRUE(ReadInt(obj, "e", 0, 10, &v));
  EXPECT_TRUE(ReadInt(obj, "f", 0, 10, &v));
  EXPECT_FALSE(ReadInt(obj, "missing", 0, 10, &v));
  EXPECT_EQ(v, 3) << "an absent field leaves the output alone";
  MaybeError e = ReadInt(obj, "d", 0, 10, &v, "outer");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "outer.d");
  EXPECT_EQ(e->message, "outer.d must be an integer from 0 to 10");
}

TEST(JsonFieldsTest, FloatRanges) {
  Json obj = Json::parse(R"({"zero":0,"one":1,"half":0.5})");
  std::optional<float> f;
  EXPECT_FALSE(ReadFloat(obj, "zero", {0, 1}, &f));
  EXPECT_TRUE(ReadFloat(obj, "zero", {0, 1, true}, &f)) << "open at the bottom";
  EXPECT_FALSE(ReadFloat(obj, "one", {0, 1, true}, &f));
  MaybeError e = ReadFloat(obj, "one", {0, 0.5}, &f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "one must be a number from 0 to 0.5");
}

TEST(JsonFieldsTest, TextPartsJoinWithNewlines) {
  std::string out;
  EXPECT_FALSE(ReadTextContent(Json::parse(R"([{"type":"text","text":"a"},
      {"type":"text","text":""},{"type":"text","text":"b","cache_control":{}}])"),
                               "c", &out));
  EXPECT_EQ(out, "a\nb");
  std::string text;
  AppendPart(&text, "");
  AppendPart(&text, "x");
  AppendPart(&text, "y");
  EXPECT_EQ(text, "x\ny");
}

TEST(JsonFieldsTest, DumpNeverThrowsOnBadUtf8) {
  Json j = {{"k", std::string("\xFF")}};
  EXPECT_EQ(DumpJson(j), "{\"k\":\"\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace hearth::api
