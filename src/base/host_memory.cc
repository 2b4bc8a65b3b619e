#include "base/host_memory.h"

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#if defined(__APPLE__)
#include <mach/mach.h>
#endif

namespace hearth {
namespace {

#if defined(__APPLE__)
std::optional<uint64_t> MachAvailable() {
  vm_statistics64_data_t vm;
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) !=
      KERN_SUCCESS) {
    return std::nullopt;
  }
  vm_size_t page = 0;
  if (host_page_size(mach_host_self(), &page) != KERN_SUCCESS) return std::nullopt;
  const uint64_t pages = static_cast<uint64_t>(vm.free_count) + vm.inactive_count + vm.purgeable_count +
                         vm.speculative_count;
  return pages * page;
}
#endif

std::optional<uint64_t> SysconfAvailable() {
#if defined(_SC_AVPHYS_PAGES)
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
#endif
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  const size_t at = meminfo.find(kKey);
  if (at == std::string_view::npos || (at > 0 && meminfo[at - 1] != '\n')) return std::nullopt;
  std::istringstream line{std::string(meminfo.substr(at + kKey.size(), 64))};
  uint64_t value = 0;
  std::string unit;
  if (!(line >> value >> unit) || unit != "kB") return std::nullopt;
  return value * 1024;
}

std::optional<uint64_t> AvailableHostMemory() {
#if defined(__APPLE__)
  if (auto bytes = MachAvailable()) return bytes;
#else
  std::ifstream in("/proc/meminfo");
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    if (auto bytes = ParseMemAvailable(text.str())) return bytes;
  }
#endif
  return SysconfAvailable();
}

std::vector<uint8_t> NewHostBuffer(size_t n) {
  std::vector<uint8_t> out;
  out.reserve(n);  // allocated, not touched
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(out.data());
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (begin + n) & ~(kHugePage - 1);
  // Advice only: where the kernel has no THP, the buffer is as it would have been.
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  out.resize(n);
  return out;
}

}  // namespace hearth
