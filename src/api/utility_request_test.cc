#include <gtest/gtest.h>

#include "api/utility.h"

namespace hearth::api::utility {
namespace {

TEST(UtilityRequestTest, TokenizeReadsItsFieldsWithDefaults) {
  auto r = ParseTokenizeRequest(R"({"content": "hi"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->content, "hi");
  EXPECT_FALSE(r->add_special);
  EXPECT_TRUE(r->parse_special);
  r = ParseTokenizeRequest(R"({"content": "hi", "add_special": true, "parse_special": null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->add_special);
  EXPECT_TRUE(r->parse_special);
}

// Each wrongly typed field is a 400 naming it, not an exception.
TEST(UtilityRequestTest, WrongTypesAreBadRequestsNamingTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {Case{R"({"content": 5})", "content"}, Case{R"({})", "content"},
                        Case{R"({"content": "x", "add_special": "yes"})", "add_special"},
                        Case{R"({"content": "x", "parse_special": 1})", "parse_special"}}) {
    auto r = ParseTokenizeRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().http_status, 400) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body;
  }
  for (const Case& c : {Case{R"({"tokens": "x"})", "tokens"}, Case{R"({})", "tokens"},
                        Case{R"({"tokens": [1, "2"]})", "tokens[1]"}, Case{R"({"tokens": [1.5]})", "tokens[0]"},
                        Case{R"({"tokens": [null]})", "tokens[0]"}, Case{R"({"tokens": [-1]})", "tokens[0]"},
                        Case{R"({"tokens": [1000]})", "tokens[0]"},
                        // 2^32 would truncate to id 0 in an int32.
                        Case{R"({"tokens": [4294967296]})", "tokens[0]"}}) {
    auto r = ParseDetokenizeRequest(c.body, 1000);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().http_status, 400) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body;
  }
  for (const Case& c : {Case{R"({"messages": "x"})", "messages"},
                        Case{R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": "no"})",
                             "add_generation_prompt"}}) {
    auto r = ParseApplyTemplateRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().http_status, 400) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body;
  }
}

TEST(UtilityRequestTest, DetokenizeAndApplyTemplateReadTheirFields) {
  auto d = ParseDetokenizeRequest(R"({"tokens": [0, 999, 12.0]})", 1000);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{0, 999, 12}));
  auto a = ParseApplyTemplateRequest(R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(a->add_generation_prompt);
  ASSERT_EQ(a->chat.messages.size(), 1u);
  a = ParseApplyTemplateRequest(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_FALSE(a->add_generation_prompt);
}

}  // namespace
}  // namespace hearth::api::utility
