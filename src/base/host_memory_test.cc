#include "base/host_memory.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hearth
