#include "bench/usage.h"

#include <gtest/gtest.h>

namespace hearth::bench {
namespace {

Usage Read(std::initializer_list<const char*> objects) {
  UsageCollector c;
  for (const char* o : objects) c.Add(Json::parse(o));
  return c.Result();
}

TEST(UsageTest, HearthAndOpenAICachedTokens) {
  const Usage u = Read({R"({"usage":{"prompt_tokens":900,"completion_tokens":32,"total_tokens":932,
                                     "prompt_tokens_details":{"cached_tokens":850}}})"});
  EXPECT_EQ(u.prompt_tokens, 900);
  EXPECT_EQ(u.reused_tokens, 850);
  EXPECT_EQ(u.completion_tokens, 32);
  EXPECT_EQ(u.source, "openai");
}

TEST(UsageTest, HearthCacheTierAndWhyReuseStopped) {
  const Usage u = Read({R"({"usage":{"prompt_tokens":900,"prompt_tokens_details":{"cached_tokens":850},
                                     "hearth_cache":{"reused_tokens":850,"prefilled_tokens":50,"tier":"ram",
                                                     "stopped_because":"prompt differs"}}})"});
  EXPECT_EQ(u.cache_tier, "ram");
  EXPECT_EQ(u.stopped_because, "prompt differs");
  // Nothing reused: the tier is null.
  const Usage none = Read({R"({"usage":{"prompt_tokens":9,"hearth_cache":{"reused_tokens":0,"tier":null}}})"});
  EXPECT_EQ(none.cache_tier, "");
  // Other servers say nothing about tiers.
  EXPECT_EQ(Read({R"({"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}})"}).cache_tier, "");
}

TEST(UsageTest, LlamaServerTimingsWin) {
  // llama-server sends both; timings are the engine's own count.
  const Usage u = Read({R"({"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":8,
                                                   "prompt_tokens_details":{"cached_tokens":700}},
                            "timings":{"cache_n":700,"prompt_n":300,"prompt_ms":152.5,"predicted_n":8}})"});
  EXPECT_EQ(u.prompt_tokens, 1000);
  EXPECT_EQ(u.reused_tokens, 700);
  EXPECT_EQ(u.prefill_ms, 152.5);
  EXPECT_EQ(u.source, "timings");
  // Timings alone still give the prompt size.
  const Usage t = Read({R"({"timings":{"cache_n":10,"prompt_n":5}})"});
  EXPECT_EQ(t.prompt_tokens, 15);
}

TEST(UsageTest, AnthropicCacheRead) {
  // message_start carries a provisional count; message_delta the final one.
  const Usage u = Read({R"({"type":"message_start","message":{"usage":{"input_tokens":500,"cache_read_input_tokens":0,
                                                                         "cache_creation_input_tokens":0,"output_tokens":0}}})",
                        R"({"type":"message_delta","usage":{"input_tokens":20,"cache_read_input_tokens":480,
                                                             "cache_creation_input_tokens":0,"output_tokens":16}})"});
  EXPECT_EQ(u.prompt_tokens, 500);
  EXPECT_EQ(u.reused_tokens, 480);
  EXPECT_EQ(u.completion_tokens, 16);
  EXPECT_EQ(u.source, "anthropic");
}

TEST(UsageTest, MissingOrNullMeansUnknown) {
  // mlx-style: no details at all; vLLM without --enable-prompt-tokens-details: null.
  for (const char* body : {R"({"usage":{"prompt_tokens":100,"completion_tokens":5}})",
                           R"({"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":null}})"}) {
    const Usage u = Read({body});
    EXPECT_EQ(u.prompt_tokens, 100);
    EXPECT_FALSE(u.reused_tokens.has_value()) << body;
    EXPECT_EQ(u.source, "none");
  }
  EXPECT_FALSE(Read({R"({"choices":[]})"}).prompt_tokens.has_value());
}

TEST(StreamReaderTest, OpenAIChunksSplitAnywhere) {
  const std::string stream =
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,"
      "\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"
      "data: [DONE]\n\n";
  for (size_t step : {size_t{1}, size_t{7}, stream.size()}) {
    StreamReader r(Flavor::kOpenAI);
    for (size_t i = 0; i < stream.size(); i += step) r.Feed(std::string_view(stream).substr(i, step));
    EXPECT_EQ(r.content(), "Hello");
    EXPECT_EQ(r.reasoning(), "hmm");
    EXPECT_EQ(r.n_pieces(), 3);
    EXPECT_TRUE(r.done());
    EXPECT_FALSE(r.error().has_value());
    EXPECT_EQ(r.usage().reused_tokens, 4);
  }
}

TEST(StreamReaderTest, ErrorsInTheStream) {
  StreamReader r(Flavor::kOpenAI);
  r.Feed("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
  r.Feed("error: {\"code\":500,\"message\":\"The model produced output that does not match\",\"type\":\"server_error\"}\n\n");
  ASSERT_TRUE(r.error().has_value());
  EXPECT_NE(r.error()->find("does not match"), std::string::npos);

  StreamReader d(Flavor::kOpenAI);
  d.Feed("data: {\"error\":{\"message\":\"boom\",\"type\":\"api_error\"}}\r\n\r\n");
  EXPECT_EQ(d.error(), "boom");
}

TEST(StreamReaderTest, AnthropicEvents) {
  StreamReader r(Flavor::kAnthropic);
  r.Feed("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7}}}\n\n"
         "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n"
         "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a\"}}\n\n"
         "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n"
         "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"
         "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":2,\"cache_read_input_tokens\":5,\"output_tokens\":3}}\n\n"
         "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  EXPECT_EQ(r.reasoning(), "a");
  EXPECT_EQ(r.content(), "b");
  EXPECT_EQ(r.n_pieces(), 3);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.usage().prompt_tokens, 7);
  EXPECT_EQ(r.usage().reused_tokens, 5);

  StreamReader e(Flavor::kAnthropic);
  e.Feed("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n");
  EXPECT_EQ(e.error(), "busy");
}

TEST(ErrorMessageTest, EitherShape) {
  EXPECT_EQ(ErrorMessage(R"({"error":{"message":"bad","type":"invalid_request_error"}})"), "bad");
  EXPECT_EQ(ErrorMessage(R"({"type":"error","error":{"type":"x","message":"worse"}})"), "worse");
  EXPECT_EQ(ErrorMessage("plain text"), "plain text");
}

}  // namespace
}  // namespace hearth::bench
