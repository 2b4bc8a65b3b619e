// A crash (SIGKILL) at any moment of a disk write loses at most the write in progress:
// after a restart every file the store offers reads back intact, and no temporary a
// crashed write left behind stays.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "cache/disk_store.h"
#include "testing/test_env.h"

namespace hearth::cache {
namespace {

namespace fs = std::filesystem;

struct DirCount {
  size_t states = 0;       // *.state: renamed into place
  size_t temporaries = 0;  // *.tmp.*: a write not finished
};

// The state files in `dir` that `before` does not hold: files this round put in place
// (the budget evicts older ones meanwhile, so counts alone can fall while writes land).
size_t NewStates(const std::string& dir, const std::set<std::string>& before) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    n += e.path().extension() == ".state" && !before.contains(e.path().filename().string()) ? 1 : 0;
  }
  return n;
}

std::set<std::string> StateNames(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".state") names.insert(e.path().filename().string());
  }
  return names;
}

DirCount CountFiles(const std::string& dir) {
  DirCount n;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos) {
      ++n.temporaries;
    } else if (e.path().extension() == ".state") {
      ++n.states;
    }
  }
  return n;
}

TEST(DiskCrashTest, KillDuringWritesThenRestart) {
  const std::string dir = testing::MakeTempDir() + "/crash";
  std::mt19937 rng(42);
  for (int round = 0; round < 5; ++round) {
    const std::set<std::string> states_before = StateNames(dir);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = DiskStore::Open(dir, 64u << 20, "ns");
      if (!store.ok()) _exit(3);
      // A round writes less than the budget (at most 400 states of 20-50 kB): the budget
      // evicts earlier rounds' files, never one this round put in place. (Writes queue ahead
      // of a slow disk and count against the budget at once, so a round that wrote more
      // could evict its own first file right after it landed.)
      for (int i = 0; i < 400; ++i) {
        // Each round writes other states than every earlier one: the first token names
        // the round, the rest the write.
        std::vector<Token> tokens(static_cast<size_t>(10 + i % 50), i);
        tokens[0] = round;
        std::vector<uint8_t> bytes(static_cast<size_t>(20000 + (i * 7919) % 30000), static_cast<uint8_t>(i));
        (void)(*store)->Write("ns", tokens, StateKind::kPartial, bytes);
      }
      for (;;) pause();  // the writer thread drains what is queued; the kill ends it all
    }
    // Kill only once this round's writer has put a file in place (however slow the
    // machine), then at a random moment of the writes that follow.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (NewStates(dir, states_before) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 80));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer should have been killed mid-loop";
    ASSERT_GT(NewStates(dir, states_before), 0u) << "round " << round << ": no file written within 60 s";
    // Whether or not the kill caught a write half done, a restart must find a temporary
    // and remove it: leave one as a crashed write would.
    std::ofstream(dir + "/00000000000000ff.state.tmp.12345") << "half a write";

    auto store = DiskStore::Open(dir, 64u << 20, "ns");
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(CountFiles(dir).temporaries, 0u) << "round " << round << ": a crashed write's temporary stayed";
    size_t offered_this_round = 0;
    for (const auto& e : (*store)->Scan()) {
      auto bytes = (*store)->Read(e.key, e.ns, e.tokens, e.kind);
      ASSERT_TRUE(bytes.ok()) << "a file offered after the crash must read back: " << bytes.status().ToString();
      ASSERT_FALSE(bytes->empty());
      const uint8_t fill = (*bytes)[0];
      EXPECT_TRUE(std::all_of(bytes->begin(), bytes->end(), [fill](uint8_t b) { return b == fill; }));
      if (e.tokens[0] == round) ++offered_this_round;
    }
    // (The budget evicts the oldest files first, never this round's.)
    EXPECT_GT(offered_this_round, 0u) << "round " << round << ": the files this round put in place are not offered";
    EXPECT_EQ((*store)->quarantined(), 0u) << "renamed-into-place files are never partial";
  }
}

}  // namespace
}  // namespace hearth::cache
