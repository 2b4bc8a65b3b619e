// The disk tier's faults through HTTP on the tiny hybrid model: a cache directory that
// cannot be used at start (the server serves without the tier and says so on stderr,
// /health and /v1/cache), and a directory whose files fail after a restart (every reply
// equals a cold run's, and the response says why reuse stopped).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "server/test_server.h"
#include "testing/faulty_file_system.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using json = nlohmann::json;
using testing::FaultyFileSystem;
using testing::FileFault;

// `ram_bytes` 1: every serialized state goes to disk.
EngineConfig Config(const std::string& cache_dir, cache::FileSystem* fs, size_t ram_bytes = 1) {
  EngineConfig ec = OneSlotConfig();
  ec.cache_ram_bytes = ram_bytes;
  ec.cache_dir = cache_dir;
  ec.cache_file_system = fs;
  return ec;
}

HttpConfig Http() {
  HttpConfig hc;
  hc.model_alias = "tiny";
  hc.warm_ahead = false;  // only the requests' own states: what the tests read back is theirs
  return hc;
}

json GetJson(httplib::Client& c, const char* path) {
  auto res = c.Get(path);
  EXPECT_TRUE(res && res->status == 200);
  return res ? json::parse(res->body) : json{};
}

json Conversation(const std::string& user) {
  return {{{"role", "system"}, {"content", "You answer briefly. " + std::string(300, 's')}},
          {{"role", "user"}, {"content", user}}};
}

// A cache directory that is a regular file, unreadable, read-only or on a full disk:
// `hearth serve` starts, serves from the device and RAM tiers, and says the disk tier
// is off and why. As root, chmod stops neither reads nor writes, so there the file
// system refuses instead (FaultyFileSystem): the test checks the same either way.
TEST(DiskTierFaultsTest, AnUnusableCacheDirectoryTurnsTheTierOffAndSaysSo) {
  const bool root = ::geteuid() == 0;
  struct Case {
    const char* name;
    std::string dir;
    std::optional<FileFault> fault;  // root, or no chmod equivalent
  };
  const std::string tmp = testing::MakeTempDir();
  std::ofstream(tmp + "/a-file") << "x";
  for (const char* d : {"/unreadable", "/read-only", "/full"}) std::filesystem::create_directories(tmp + d + "/quarantine");
  std::vector<Case> cases = {
      {"a regular file", tmp + "/a-file", std::nullopt},
      {"unreadable", tmp + "/unreadable", root ? std::optional(FileFault::kUnreadableDir) : std::nullopt},
      {"read-only", tmp + "/read-only", root ? std::optional(FileFault::kWriteError) : std::nullopt},
      {"full", tmp + "/full", FileFault::kDiskFull},
  };
  if (!root) {
    ASSERT_EQ(::chmod((tmp + "/unreadable").c_str(), 0300), 0);  // write and enter, but not list
    ASSERT_EQ(::chmod((tmp + "/read-only").c_str(), 0500), 0);
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FaultyFileSystem faulty;
    if (c.fault) faulty.Inject(*c.fault, FaultyFileSystem::kAlways);
    ::testing::internal::CaptureStderr();
    auto server = std::make_unique<TestServer>(Config(c.dir, &faulty, 64u << 20), Http());
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(server->ok());
    EXPECT_NE(log.find("hearth: disk tier OFF: cannot use cache directory " + c.dir), std::string::npos) << log;
    const json health = GetJson(server->client(), "/health");
    EXPECT_EQ(health["status"], "ok");
    EXPECT_NE(health["disk_tier"]["unavailable"].get<std::string>().find("cannot use cache directory"), std::string::npos)
        << health.dump();
    const json cache = GetJson(server->client(), "/v1/cache");
    EXPECT_EQ(cache["tiers"]["disk"]["unavailable"], health["disk_tier"]["unavailable"]) << cache.dump();
    // Serving, with reuse from the other tiers.
    json messages = Conversation("Hello?");
    json r = PostGreedyChat(server->client(), messages, 4);
    messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And then?"}});
    r = PostGreedyChat(server->client(), messages, 4);
    EXPECT_GT(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << r.dump();
  }
  ::chmod((tmp + "/unreadable").c_str(), 0700);
  ::chmod((tmp + "/read-only").c_str(), 0700);
}

// Conversations on one system prompt are written to disk by one server; the next server
// on the directory meets a fault (a read error, or files damaged or never written by the
// first). Each follow-up is answered as a cold run answers it, the response says why
// reuse stopped short, and /v1/cache counts what went wrong.
TEST(DiskTierFaultsTest, AfterARestartEveryFaultServesWhatAColdRunServes) {
  for (FileFault f : {FileFault::kReadError, FileFault::kFlipBit, FileFault::kTruncate, FileFault::kWriteError}) {
    SCOPED_TRACE(testing::FileFaultName(f));
    const std::string dir = testing::MakeTempDir() + "/cache";
    const bool at_write = f != FileFault::kReadError;
    std::vector<json> histories;
    {
      FaultyFileSystem faulty;
      if (at_write) faulty.Inject(f, FaultyFileSystem::kAlways);
      TestServer first(Config(dir, &faulty), Http());
      ASSERT_TRUE(first.ok());
      for (const char* user : {"Hello?", "What is a cache?", "Name a colour."}) {
        json messages = Conversation(user);
        json r = PostGreedyChat(first.client(), messages, 6);
        messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
        messages.push_back({{"role", "user"}, {"content", "Go on."}});
        histories.push_back(messages);
      }
      first.loop().Stop();  // writes every state behind, through the faults
      EXPECT_EQ(faulty.fired(f) > 0, at_write);
    }
    size_t state_files = 0;
    // The disk tier keeps its files in a directory of its model and layout under dir.
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) state_files += e.path().extension() == ".state" ? 1 : 0;
    EXPECT_EQ(state_files == 0, f == FileFault::kWriteError) << state_files << " state files";
    FaultyFileSystem faulty;
    if (!at_write) faulty.Inject(f, FaultyFileSystem::kAlways);
    TestServer second(Config(dir, &faulty), Http());
    ASSERT_TRUE(second.ok());
    std::string why;
    int compared = 0;
    for (size_t i = 0; i < histories.size(); ++i) {
      std::vector<engine::Token> prompt;  // for ClearGreedySteps: the prompt the server renders
      engine::RenderOptions o;
      o.enable_thinking = false;
      std::vector<engine::ChatMessage> ms;
      for (const auto& m : histories[i]) ms.push_back({.role = m["role"], .content = m["content"]});
      auto rendered = second.chat_template().Render(ms, o);
      ASSERT_TRUE(rendered.ok());
      prompt = second.model().Tokenize(rendered->prompt, false, true);
      const int clear = testing::ClearGreedySteps(second.model(), prompt, 8);
      json warm = PostGreedyChat(second.client(), histories[i], std::max(clear, 1));
      if (warm["usage"]["hearth_cache"].contains("stopped_because")) why += warm["usage"]["hearth_cache"]["stopped_because"].get<std::string>() + "\n";
      if (clear == 0) continue;
      json cold = PostGreedyChat(second.client(), histories[i], clear, "cold-" + std::to_string(i));
      EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
      EXPECT_EQ(warm["choices"][0]["message"], cold["choices"][0]["message"]) << "conversation " << i;
      ++compared;
    }
    EXPECT_GT(compared, 0) << "no greedy step had a clear winner: nothing was compared";
    const json tiers = GetJson(second.client(), "/v1/cache")["tiers"];
    const json snapshots = GetJson(second.client(), "/v1/cache")["snapshots"];
    if (f == FileFault::kReadError) {
      EXPECT_NE(why.find("Input/output error (injected)"), std::string::npos) << why;
      EXPECT_GT(tiers["disk"]["read_errors"].get<int>(), 0) << tiers.dump();
    } else if (f == FileFault::kFlipBit) {  // found at read time, by the payload checksum
      EXPECT_GT(snapshots["quarantined"].get<int>(), 0) << snapshots.dump();
      EXPECT_NE(why.find("is corrupt"), std::string::npos) << why;
    } else if (f == FileFault::kTruncate) {  // found at start-up, by the file's size
      EXPECT_GT(snapshots["quarantined"].get<int>(), 0) << snapshots.dump();
    }  // kWriteError left no file: checked above
  }
}

}  // namespace
}  // namespace hearth::server
