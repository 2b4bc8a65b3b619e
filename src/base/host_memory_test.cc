#include "base/host_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace hearth {
namespace {

TEST(HostMemoryTest, ParsesMemAvailable) {
  const char* meminfo =
      "MemTotal:       24576000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   20000000 kB\n"
      "Buffers:          100000 kB\n";
  EXPECT_EQ(ParseMemAvailable(meminfo), std::optional<uint64_t>(20000000ull * 1024));
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\nMemFree: 50 kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots\n"), std::nullopt);
}

TEST(HostMemoryTest, ReportsSomethingBelowTotal) {
  const std::optional<uint64_t> avail = AvailableHostMemory();
  ASSERT_TRUE(avail.has_value());
  EXPECT_GT(*avail, 16ull << 20);
}

TEST(HostMemoryTest, NewHostBufferIsZeroedAndSized) {
  const std::vector<uint8_t> small = NewHostBuffer(100);
  EXPECT_EQ(small.size(), 100u);
  const std::vector<uint8_t> big = NewHostBuffer(24u << 20);
  ASSERT_EQ(big.size(), 24u << 20);
  EXPECT_TRUE(std::all_of(big.begin(), big.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(NewHostBuffer(0).empty());
}

#if defined(__linux__)
// The VmFlags of the mapping of /proc/self/smaps that holds `address`.
std::string VmFlagsAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.starts_with("VmFlags:")) {
      return line;
    }
  }
  return "";
}

// The buffer's inner 2 MiB blocks carry the huge-page advice ("hg"), whatever the kernel's
// THP setting makes of it.
TEST(HostMemoryTest, NewHostBufferAdvisesHugePagesOnLinux) {
  const std::vector<uint8_t> big = NewHostBuffer(24u << 20);
  const std::string flags = VmFlagsAt(big.data() + big.size() / 2);
  ASSERT_FALSE(flags.empty()) << "no mapping holds the buffer";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}
#endif

}  // namespace
}  // namespace hearth
