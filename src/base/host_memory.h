// AvailableHostMemory: how much host RAM new allocations could take now without swapping
// or pushing other processes out, for sizing caches at start-up. NewHostBuffer: a large
// buffer whose first touch costs as little as the OS allows.
//
// Thread safety: any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace hearth {

// Linux: MemAvailable from /proc/meminfo (free memory plus the page cache and slabs the
// kernel can reclaim), else free pages from sysconf. macOS: free, inactive, purgeable
// and speculative pages from host_statistics64. Elsewhere: free pages from sysconf where
// it has them. nullopt when none of these answers.
std::optional<uint64_t> AvailableHostMemory();

// The MemAvailable line of /proc/meminfo's text, in bytes; nullopt when it is missing or
// malformed (kernels before 3.14 lack it).
std::optional<uint64_t> ParseMemAvailable(std::string_view meminfo);

// `n` zero bytes. A fresh buffer's first touch costs a page fault per page: about 3 ms per
// MiB in the VMs these tests run in. On Linux the buffer's whole 2 MiB blocks are advised
// as transparent huge pages before that touch (MADV_HUGEPAGE: one fault per 2 MiB where
// the kernel's THP setting is `madvise` or `always`; a 19 MiB buffer took 56-59 ms in
// 4 KiB pages, 5-40 ms in huge pages, the more when memory must be compacted for them).
// Elsewhere a plain buffer.
std::vector<uint8_t> NewHostBuffer(size_t n);

}  // namespace hearth
