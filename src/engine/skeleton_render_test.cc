#include "engine/skeleton_render.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hearth::engine {
namespace {

const std::string kLong(100, 'x');

TEST(SkeletonGuardTest, KeepsTheLiteralsATextIsTestedWith) {
  SkeletonGuard guard(
      "{%- set open = '<think>' %}{{- '<|im_start|>' + role + '\\n' }}{%- if '</think>' in content %}"
      "{{- content.split('<tool_response>')[0] }}{%- endif %}{{- 'user' in x }}{# '<comment>' #}");
  const auto& l = guard.literals();
  auto has = [&](const std::string& s) { return std::find(l.begin(), l.end(), s) != l.end(); };
  EXPECT_TRUE(has("<think>"));           // a statement's literal
  EXPECT_TRUE(has("</think>"));          // the left side of `in`
  EXPECT_TRUE(has("<tool_response>"));   // a call's argument
  EXPECT_FALSE(has("<|im_start|>"));     // output only
  EXPECT_FALSE(has("\n"));               // whitespace: the placeholder keeps the text's own
  EXPECT_FALSE(has("user"));             // words: no markup
  EXPECT_FALSE(has("<comment>"));
  EXPECT_FALSE(guard.Inert("a </think> b"));
  EXPECT_FALSE(guard.Inert("hearth-standin-3"));
  EXPECT_TRUE(guard.Inert("a <|im_start|> b"));
}

TEST(SkeletonRenderTest, StandInKeepsOuterWhitespaceAndRestorePutsTheTextBack) {
  SkeletonGuard guard("{%- if '</think>' in c %}{% endif %}");
  std::vector<Standin> standins;
  const std::string text = "\n  " + kLong + "\nmore\t \n";
  const std::string placeholder = StandIn(text, guard, &standins);
  ASSERT_EQ(standins.size(), 1u);
  EXPECT_TRUE(placeholder.starts_with("\n  \x01"));
  EXPECT_TRUE(placeholder.ends_with("\x01\t \n"));
  EXPECT_LT(placeholder.size(), text.size());
  // The template trims it and writes it twice.
  const std::string core = standins[0].core;
  auto restored = Restore("<a>" + core + "|" + placeholder + "</a>", standins);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(*restored, "<a>" + kLong + "\nmore|" + text + "</a>");
}

TEST(SkeletonRenderTest, ShortMarkupOrBlankTextsStayAsTheyAre) {
  SkeletonGuard guard("{%- if '</think>' in c %}{% endif %}");
  std::vector<Standin> standins;
  EXPECT_EQ(StandIn("short", guard, &standins), "short");
  EXPECT_EQ(StandIn(kLong + "</think>", guard, &standins), kLong + "</think>");
  EXPECT_EQ(StandIn(std::string(100, ' '), guard, &standins), std::string(100, ' '));
  EXPECT_TRUE(standins.empty());
}

TEST(SkeletonRenderTest, RestoreRefusesACoreTheTemplateChanged) {
  SkeletonGuard guard("");
  std::vector<Standin> standins;
  StandIn(kLong, guard, &standins);
  const std::string core = standins[0].core;
  const std::string word = core.substr(1, core.size() - 2);
  EXPECT_FALSE(Restore("\\u0001" + word + "\\u0001", standins).has_value());  // escaped
  EXPECT_FALSE(Restore(core.substr(0, core.size() - 1), standins).has_value());  // cut
  EXPECT_FALSE(Restore("\x01hearth-standin-7\x01", standins).has_value());  // not ours
  EXPECT_FALSE(Restore("\x01hearth-standin-00\x01", standins).has_value());
  EXPECT_TRUE(Restore("no cores at all", standins).has_value());
}

}  // namespace
}  // namespace hearth::engine
