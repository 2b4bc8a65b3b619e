// AvailableHostMemory: how much host RAM new allocations could take now without swapping
// or pushing other processes out, for sizing caches at start-up.
//
// Thread safety: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hearth {

// Linux: MemAvailable from /proc/meminfo (free memory plus the page cache and slabs the
// kernel can reclaim), else free pages from sysconf. macOS: free, inactive, purgeable
// and speculative pages from host_statistics64. Elsewhere: free pages from sysconf where
// it has them. nullopt when none of these answers.
std::optional<uint64_t> AvailableHostMemory();

// The MemAvailable line of /proc/meminfo's text, in bytes; nullopt when it is missing or
// malformed (kernels before 3.14 lack it).
std::optional<uint64_t> ParseMemAvailable(std::string_view meminfo);

}  // namespace hearth
