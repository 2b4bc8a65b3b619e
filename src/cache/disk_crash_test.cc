// A crash (SIGKILL) at any moment of a disk write loses at most the write in progress:
// after a restart every file the store offers reads back intact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "cache/disk_store.h"
#include "testing/test_env.h"

namespace hearth::cache {
namespace {

TEST(DiskCrashTest, KillDuringWritesThenRestart) {
  const std::string dir = testing::MakeTempDir() + "/crash";
  std::mt19937 rng(42);
  for (int round = 0; round < 5; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = DiskStore::Open(dir, 64u << 20, "ns");
      if (!store.ok()) _exit(3);
      for (int i = 0;; ++i) {
        std::vector<Token> tokens(static_cast<size_t>(10 + i % 50), i);
        std::vector<uint8_t> bytes(static_cast<size_t>(200000 + (i * 7919) % 300000), static_cast<uint8_t>(i));
        (void)(*store)->Write("ns", tokens, StateKind::kPartial, bytes);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer should have been killed mid-loop";

    auto store = DiskStore::Open(dir, 64u << 20, "ns");
    ASSERT_TRUE(store.ok());
    for (const auto& e : (*store)->Scan()) {
      auto bytes = (*store)->Read(e.key, e.ns, e.tokens, e.kind);
      ASSERT_TRUE(bytes.ok()) << "a file offered after the crash must read back: " << bytes.status().ToString();
      ASSERT_FALSE(bytes->empty());
      const uint8_t fill = (*bytes)[0];
      EXPECT_TRUE(std::all_of(bytes->begin(), bytes->end(), [fill](uint8_t b) { return b == fill; }));
    }
    EXPECT_EQ((*store)->quarantined(), 0u) << "renamed-into-place files are never partial";
  }
}

}  // namespace
}  // namespace hearth::cache
