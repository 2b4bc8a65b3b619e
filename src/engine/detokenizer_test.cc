#include "engine/detokenizer.h"

#include <gtest/gtest.h>

#include "base/utf8.h"
#include "testing/test_env.h"

namespace hearth::engine {
namespace {

TEST(DetokenizerTest, StreamNeverSplitsACharacterAndEqualsWholeText) {
  const Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  // Egyptian hieroglyph A001, Gothic letter hwair, mathematical fraktur U, flamingo: each
  // takes several byte-level tokens in the Qwen vocabulary.
  const std::string text = "caf\xC3\xA9 \xF0\x93\x80\x80 \xF0\x90\x8D\x88\xF0\x9D\x94\x98 \xF0\x9F\xA6\xA9 end";
  std::vector<Token> toks = m->Tokenize(text, false, false);
  // Byte-level BPE splits rare characters over several tokens: the stream must hold the
  // partial bytes back.
  bool some_token_is_partial = false;
  for (Token t : toks) some_token_is_partial |= !IsValidUtf8(m->TokenPiece(t, false));
  EXPECT_TRUE(some_token_is_partial) << "test text should exercise split characters";
  Detokenizer d(*m, false);
  std::string streamed;
  for (Token t : toks) {
    std::string piece = d.Push(t);
    EXPECT_TRUE(IsValidUtf8(piece));
    streamed += piece;
  }
  streamed += d.Flush();
  EXPECT_EQ(streamed, text);
}

TEST(DetokenizerTest, FlushReplacesDanglingBytes) {
  const Model* m = testing::LoadTestModel("qwen35");
  ASSERT_NE(m, nullptr);
  std::vector<Token> toks = m->Tokenize("\xF0\x93\x80\x80", false, false);
  ASSERT_GT(toks.size(), 1u);
  Detokenizer d(*m, false);
  EXPECT_EQ(d.Push(toks[0]), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace hearth::engine
