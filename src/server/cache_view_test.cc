#include "server/cache_view.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hearth::server {
namespace {

using json = nlohmann::json;

// The JSON shows counts and hashes: the namespace string (which may name a tenant) and
// anything like token text never appear.
TEST(CacheViewTest, ShowsTheTreeAndRequestsWithoutNamespacesOrText) {
  cache::CacheSummary s;
  s.ram_budget_bytes = 1000;
  s.device_sequences = 4;
  s.nodes.push_back({.id = 0, .ns = "model|tenant-secret|", .ns_id = 0xabc, .depth = 0});
  s.nodes.push_back({.id = 1,
                     .parent = 0,
                     .ns = "model|tenant-secret|",
                     .ns_id = 0xabc,
                     .depth = 12,
                     .n_children = 2,
                     .states = {{12, cache::StateKind::kPartial, cache::Tier::kRam, 300}}});
  s.namespaces.push_back({.ns = "model|tenant-secret|", .ns_id = 0xabc, .n_conversations = 2, .bytes_ram = 300});
  RequestRecord r;
  r.ns = "model|tenant-secret|";
  r.ns_id = 0xabc;
  r.outcome = "done";
  r.n_prompt = 50;
  r.n_reused = 12;
  r.n_matched = 20;
  r.n_prefilled = 38;
  r.n_generated = 5;
  r.tier = "ram";
  r.ttft_ms = 7.5;
  r.stopped_because = "no usable state between position 12 and 20";
  const std::string text = FormatCacheSummary(s, {r});
  EXPECT_EQ(text.find("tenant-secret"), std::string::npos) << text;
  const json j = json::parse(text);
  const json& nodes = j["tree"]["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[0]["parent"].is_null());
  EXPECT_EQ(nodes[1]["parent"], 0);
  EXPECT_EQ(nodes[1]["depth"], 12);
  EXPECT_EQ(nodes[1]["children"], 2);
  EXPECT_EQ(nodes[1]["namespace"], "0000000000000abc");
  EXPECT_EQ(nodes[1]["states"][0], json({{"kind", "partial"}, {"tier", "ram"}, {"bytes", 300}}));
  EXPECT_EQ(j["tree"]["truncated"], false);
  EXPECT_EQ(j["tiers"]["device"]["capacity"], 4);
  EXPECT_EQ(j["tiers"]["ram"]["budget"], 1000);
  EXPECT_EQ(j["namespaces"][0]["bytes"]["ram"], 300);
  const json& req = j["requests"][0];
  EXPECT_EQ(req["prompt_tokens"], 50);
  EXPECT_EQ(req["reused_tokens"], 12);
  EXPECT_EQ(req["prefilled_tokens"], 38);
  EXPECT_EQ(req["recomputed_tokens"], 8);
  EXPECT_EQ(req["new_tokens"], 30);
  EXPECT_EQ(req["generated_tokens"], 5);
  EXPECT_EQ(req["tier"], "ram");
  EXPECT_EQ(req["ttft_ms"], 7.5);
  EXPECT_EQ(req["stopped_because"], r.stopped_because);
  EXPECT_EQ(req["namespace"], "0000000000000abc");
}

}  // namespace
}  // namespace hearth::server
