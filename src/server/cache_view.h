// The JSON of GET /v1/cache: a cache summary (cache/cache_summary.h) and the recent
// requests (request_log.h), as the caller may see them. docs/api.md lists every field.
//
// Thread safety: pure functions of their arguments (any thread).
//
// What it shows: counts, positions, kinds, tiers, bytes, times and the cache's own words
// on where reuse stopped. Never token text, and namespaces only as 16 hex digits of their
// hash.
#pragma once

#include <string>
#include <vector>

#include "cache/cache_summary.h"
#include "server/request_log.h"

namespace hearth::server {

std::string FormatCacheSummary(const cache::CacheSummary& summary, const std::vector<RequestRecord>& requests);

}  // namespace hearth::server
