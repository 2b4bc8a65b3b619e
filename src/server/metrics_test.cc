#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>

namespace hearth::server {
namespace {

// name -> value for every sample line; also checks each sample has HELP and TYPE lines.
std::map<std::string, std::string> Samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::map<std::string, int> described;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      std::string rest = line.substr(7);
      described[rest.substr(0, rest.find(' '))]++;
      continue;
    }
    EXPECT_NE(line[0], '#') << line;
    const size_t sp = line.find(' ');
    EXPECT_NE(sp, std::string::npos) << line;
    const std::string name = line.substr(0, sp);
    std::string family = name.substr(0, name.find('{'));  // labels share their family's HELP/TYPE
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {  // so do a histogram's series
      if (described[family] == 0 && family.ends_with(suffix)) family.resize(family.size() - std::strlen(suffix));
    }
    EXPECT_EQ(described[family], 2) << name << " lacks HELP or TYPE";
    EXPECT_EQ(out.count(name), 0u) << name << " appears twice";
    out[name] = line.substr(sp + 1);
  }
  return out;
}

TEST(MetricsTest, EveryStatIsExposedWithItsValue) {
  EngineStats s;
  s.requests_finished = 11;
  s.requests_cancelled = 3;
  s.requests_failed = 2;
  s.prompt_tokens = 1000;
  s.prompt_tokens_cached = 600;
  s.prompt_tokens_prefilled = 400;
  s.generated_tokens = 77;
  s.decode_calls = 55;
  s.slots_busy = 4;
  s.queued = 9;
  s.background_tasks = 6;
  s.background_skipped = 4;
  s.background_failed = 1;
  s.shadow_tokens = 30;
  s.shadow_tokens_with_decode = 12;
  s.shadow_renders = 7;
  const std::string text = FormatPrometheus(s);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  auto m = Samples(text);
  EXPECT_EQ(m["hearth_requests_finished_total"], "11");
  EXPECT_EQ(m["hearth_requests_cancelled_total"], "3");
  EXPECT_EQ(m["hearth_requests_failed_total"], "2");
  EXPECT_EQ(m["hearth_prompt_tokens_total"], "1000");
  EXPECT_EQ(m["hearth_prompt_tokens_cached_total"], "600");
  EXPECT_EQ(m["hearth_prompt_tokens_prefilled_total"], "400");
  EXPECT_EQ(m["hearth_generated_tokens_total"], "77");
  EXPECT_EQ(m["hearth_decode_calls_total"], "55");
  EXPECT_EQ(m["hearth_slots_busy"], "4");
  EXPECT_EQ(m["hearth_requests_queued"], "9");
  EXPECT_EQ(m["hearth_warm_ahead_tasks_total"], "6");
  EXPECT_EQ(m["hearth_warm_ahead_skipped_total"], "4");
  EXPECT_EQ(m["hearth_warm_ahead_failed_total"], "1");
  EXPECT_EQ(m["hearth_shadow_tokens_total"], "30");
  EXPECT_EQ(m["hearth_shadow_tokens_with_decode_total"], "12");
  EXPECT_EQ(m["hearth_shadow_renders_total"], "7");
}

TEST(MetricsTest, CacheCountersCarryTheirTier) {
  EngineStats s;
  s.cache.hits_device = 5;
  s.cache.hits_ram = 2;
  s.cache.hits_disk = 1;
  s.cache.bytes_ram = 4096;
  s.cache.snapshots_quarantined = 3;
  auto m = Samples(FormatPrometheus(s));
  EXPECT_EQ(m["hearth_cache_hits_total{tier=\"device\"}"], "5");
  EXPECT_EQ(m["hearth_cache_hits_total{tier=\"ram\"}"], "2");
  EXPECT_EQ(m["hearth_cache_hits_total{tier=\"disk\"}"], "1");
  EXPECT_EQ(m["hearth_cache_bytes{tier=\"ram\"}"], "4096");
  EXPECT_EQ(m["hearth_cache_snapshots_quarantined_total"], "3");
}

TEST(MetricsTest, TheSharedTierIsCountedOnlyWhenThereIsOne) {
  EngineStats s;
  EXPECT_EQ(Samples(FormatPrometheus(s)).count("hearth_cache_shared_up"), 0u);
  s.cache.hits_shared = 4;
  s.shared = cache::SharedStats{};
  s.shared->connected = true;
  s.shared->puts = 9;
  s.shared->written = 7;
  s.shared->dropped = 2;
  s.shared->hits = 4;
  s.shared->misses = 3;
  s.shared->lookup_errors = 1;
  s.shared->bytes_read = 1000;
  auto m = Samples(FormatPrometheus(s));
  EXPECT_EQ(m["hearth_cache_hits_total{tier=\"shared\"}"], "4");
  EXPECT_EQ(m["hearth_cache_shared_up"], "1");
  EXPECT_EQ(m["hearth_cache_shared_states_total{outcome=\"written\"}"], "7");
  EXPECT_EQ(m["hearth_cache_shared_states_total{outcome=\"dropped\"}"], "2");
  EXPECT_EQ(m["hearth_cache_shared_lookups_total{outcome=\"miss\"}"], "2");
  EXPECT_EQ(m["hearth_cache_shared_lookups_total{outcome=\"error\"}"], "1");
  EXPECT_EQ(m["hearth_cache_shared_bytes_total{op=\"read\"}"], "1000");
}

TEST(MetricsTest, CountersEndInTotalAndGaugesDoNot) {
  const std::string text = FormatPrometheus({});
  std::istringstream in(text);
  std::string line;
  int n_types = 0;
  while (std::getline(in, line)) {
    if (!line.starts_with("# TYPE ")) continue;
    ++n_types;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    EXPECT_TRUE(name.starts_with("hearth_")) << name;
    if (type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    } else {
      EXPECT_EQ(type, "gauge") << name;
      EXPECT_FALSE(name.ends_with("_total")) << name;
    }
  }
  EXPECT_GE(n_types, 20);
  for (const char* family : {"hearth_cache_hits_total", "hearth_cache_bytes", "hearth_cache_misses_total",
                             "hearth_cache_snapshots_quarantined_total", "hearth_volatile_spans_total",
                             "hearth_warm_ahead_tasks_total"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
  }
}

// Histograms follow Prometheus's conventions: cumulative _bucket series ending in
// le="+Inf", then _sum and _count, in seconds.
TEST(MetricsTest, HistogramsAreCumulativeInSeconds) {
  RequestMetrics metrics;
  api::Completion fast;
  fast.timings = api::Timings{.queued_s = 0.002, .prefill_s = 0.04, .decode_s = 0.2, .ttft_s = 0.045};
  fast.usage.cache = api::CacheReport{.reused_tokens = 100, .tier = "ram", .restore_ms = 3};
  api::Completion slow;
  slow.timings = api::Timings{.queued_s = 1.5, .prefill_s = 7, .decode_s = 40, .ttft_s = 8.6};
  api::Completion no_token;  // ended before its first token: no ttft, no decode
  no_token.timings = api::Timings{.queued_s = 0.001, .prefill_s = 0.3};
  api::Completion untimed;   // not ended by the engine: not recorded
  for (const auto* c : {&fast, &slow, &no_token, &untimed}) metrics.Record(*c);

  auto m = Samples(metrics.FormatPrometheus());
  EXPECT_EQ(m["hearth_time_to_first_token_seconds_bucket{le=\"0.05\"}"], "1");
  EXPECT_EQ(m["hearth_time_to_first_token_seconds_bucket{le=\"10\"}"], "2");
  EXPECT_EQ(m["hearth_time_to_first_token_seconds_bucket{le=\"+Inf\"}"], "2");
  EXPECT_EQ(m["hearth_time_to_first_token_seconds_count"], "2");
  EXPECT_EQ(m["hearth_time_to_first_token_seconds_sum"], "8.645");
  EXPECT_EQ(m["hearth_request_prefill_seconds_count"], "3");
  EXPECT_EQ(m["hearth_request_prefill_seconds_bucket{le=\"0.05\"}"], "1");
  EXPECT_EQ(m["hearth_request_decode_seconds_count"], "2");
  EXPECT_EQ(m["hearth_request_decode_seconds_bucket{le=\"30\"}"], "1");
  EXPECT_EQ(m["hearth_request_queue_wait_seconds_bucket{le=\"0.005\"}"], "2");
  EXPECT_EQ(m["hearth_request_queue_wait_seconds_count"], "3");
  EXPECT_EQ(m["hearth_cache_restore_seconds_bucket{tier=\"ram\",le=\"0.0025\"}"], "0");
  EXPECT_EQ(m["hearth_cache_restore_seconds_bucket{tier=\"ram\",le=\"0.005\"}"], "1");
  EXPECT_EQ(m["hearth_cache_restore_seconds_sum{tier=\"ram\"}"], "0.003");
  EXPECT_EQ(m["hearth_cache_restore_seconds_count{tier=\"disk\"}"], "0");
  const std::string text = metrics.FormatPrometheus();
  EXPECT_NE(text.find("# TYPE hearth_cache_restore_seconds histogram\n"), std::string::npos);
}

}  // namespace
}  // namespace hearth::server
