#include "server/cache_view.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace hearth::server {
namespace {

using nlohmann::json;

std::string Hex(uint64_t id) {
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(id));
  return out;
}

json StatesJson(const std::vector<cache::CacheSummary::StateInfo>& states, bool with_position) {
  json out = json::array();
  for (const auto& st : states) {
    json s = {{"kind", cache::StateKindName(st.kind)}, {"tier", cache::TierName(st.tier)}, {"bytes", st.bytes}};
    if (with_position) s["position"] = st.position;
    out.push_back(std::move(s));
  }
  return out;
}

json TreeJson(const cache::CacheSummary& summary) {
  json nodes = json::array();
  for (const auto& n : summary.nodes) {
    nodes.push_back({{"id", n.id},
                     {"parent", n.parent ? json(*n.parent) : json(nullptr)},
                     {"namespace", Hex(n.ns_id)},
                     {"depth", n.depth},
                     {"children", n.n_children},
                     {"last_used", n.last_used},
                     {"states", StatesJson(n.states, false)}});
  }
  return {{"nodes", std::move(nodes)}, {"truncated", summary.nodes_truncated}};
}

json NamespacesJson(const cache::CacheSummary& summary) {
  json out = json::array();
  for (const auto& e : summary.namespaces) {
    out.push_back({{"namespace", Hex(e.ns_id)},
                   {"conversations", e.n_conversations},
                   {"nodes", e.n_nodes},
                   {"states", e.n_states},
                   {"device_tokens", e.tokens_device},
                   {"bytes", {{"ram", e.bytes_ram}, {"disk", e.bytes_disk}}}});
  }
  return out;
}

json RequestsJson(const std::vector<RequestRecord>& requests) {
  json out = json::array();
  for (const RequestRecord& r : requests) {
    out.push_back({{"id", r.id},
                   {"finished_unix_ms", r.finished_unix_ms},
                   {"namespace", Hex(r.ns_id)},
                   {"outcome", r.outcome},
                   {"prompt_tokens", r.n_prompt},
                   {"reused_tokens", r.n_reused},
                   {"prefilled_tokens", r.n_prefilled},
                   {"recomputed_tokens", r.n_recomputed()},
                   {"new_tokens", r.n_new()},
                   {"generated_tokens", r.n_generated},
                   {"tier", r.tier.empty() ? json(nullptr) : json(r.tier)},
                   {"restore_ms", r.restore_ms},
                   {"prefill_ms", r.prefill_ms},
                   {"ttft_ms", r.ttft_ms ? json(*r.ttft_ms) : json(nullptr)},
                   {"stopped_because", r.stopped_because}});
  }
  return out;
}

}  // namespace

std::string FormatCacheSummary(const cache::CacheSummary& summary, const std::vector<RequestRecord>& requests) {
  const cache::CacheStats& s = summary.stats;
  json out = {
      {"nodes", s.n_nodes},
      {"states", s.n_states},
      {"device_sequences_cached", s.device_cached},
      {"bytes_ram", s.bytes_ram},
      {"bytes_disk", s.bytes_disk},
      {"hits", {{"device", s.hits_device}, {"ram", s.hits_ram}, {"disk", s.hits_disk}, {"shared", s.hits_shared}}},
      {"misses", s.misses},
      {"tokens_reused", s.tokens_reused},
      {"snapshots", {{"taken", s.snapshots_taken}, {"evicted", s.snapshots_evicted}, {"quarantined", s.snapshots_quarantined}}},
      {"tiers",
       {{"device", {{"sequences", s.device_cached}, {"capacity", summary.device_sequences}}},
        {"ram",
         {{"bytes", s.bytes_ram},
          {"budget", summary.ram_budget_bytes},
          {"held_bytes", s.bytes_held},
          {"holds", s.n_holds}}},
        {"disk",
         {{"bytes", s.bytes_disk},
          {"budget", summary.disk_budget_bytes},
          {"read_errors", s.disk_read_errors},
          {"write_errors", s.disk_write_errors}}}}},
      {"n_conversations", summary.n_conversations},
  };
  if (!summary.disk_unavailable.empty()) out["tiers"]["disk"]["unavailable"] = summary.disk_unavailable;
  if (const auto& sh = summary.shared) {
    out["tiers"]["shared"] = {{"connected", sh->connected},     {"puts", sh->puts},
                              {"written", sh->written},         {"dropped", sh->dropped},
                              {"write_errors", sh->write_errors}, {"lookups", sh->lookups},
                              {"hits", sh->hits},               {"misses", sh->misses},
                              {"lookup_errors", sh->lookup_errors}, {"bytes_written", sh->bytes_written},
                              {"bytes_read", sh->bytes_read},   {"queued_bytes", sh->queued_bytes}};
  }
  json conversations = json::array();
  for (const auto& c : summary.conversations) {
    conversations.push_back({{"namespace", Hex(c.ns_id)},
                             {"tokens", c.n_tokens},
                             {"shared_tokens", c.n_shared},
                             {"states", StatesJson(c.states, true)}});
  }
  out["conversations"] = std::move(conversations);
  out["namespaces"] = NamespacesJson(summary);
  out["tree"] = TreeJson(summary);
  out["requests"] = RequestsJson(requests);
  return out.dump();
}

}  // namespace hearth::server
