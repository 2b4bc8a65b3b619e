#include "server/api_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "testing/test_env.h"

namespace hearth::server {
namespace {

namespace fs = std::filesystem;

std::string WriteKeyFile(const std::string& text, fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) {
  const std::string path = testing::MakeTempDir() + "/keys";
  std::ofstream(path) << text;
  fs::permissions(path, perms);
  return path;
}

TEST(ApiKeysTest, KeysComeFromFlagsAFileAndTheEnvironment) {
  const std::string file = WriteKeyFile("# clients\n\n  key-file-1  \nkey-flag\r\n# key-commented\nkey-file-2\n");
  auto keys = CollectApiKeys({"key-flag"}, file, std::string_view(" key-env-1, ,key-env-2,key-file-1"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{"key-flag", "key-file-1", "key-file-2", "key-env-1", "key-env-2"}));
  auto none = CollectApiKeys({}, "", std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "no key anywhere: no authentication";
  auto unset = CollectApiKeys({}, "", std::string_view(""));
  ASSERT_TRUE(unset.ok());
  EXPECT_TRUE(unset->empty()) << "an empty HEARTH_API_KEY is as good as unset";
}

// Each mistake that would leave the server open, or with a key no client can send, stops
// the start with a message that names the source.
TEST(ApiKeysTest, MistakesStopTheStartAndSayWhere) {
  auto message = [](const StatusOr<std::vector<std::string>>& r) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.status().message();
  };
  EXPECT_NE(message(CollectApiKeys({""}, "", std::nullopt)).find("--api-key gives an empty"), std::string::npos);
  EXPECT_NE(message(CollectApiKeys({"two words"}, "", std::nullopt)).find("whitespace"), std::string::npos);
  const std::string shared = WriteKeyFile("key-1\n", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::string m = message(CollectApiKeys({}, shared, std::nullopt));
  EXPECT_NE(m.find("can be read by other users (mode 0640)"), std::string::npos) << m;
  EXPECT_NE(m.find("chmod 600"), std::string::npos) << m;
  EXPECT_NE(message(CollectApiKeys({}, WriteKeyFile("# only a comment\n\n"), std::nullopt)).find("holds no key"),
            std::string::npos);
  EXPECT_NE(message(CollectApiKeys({}, WriteKeyFile("ok\nbad\tkey\n"), std::nullopt)).find("line 2 of --api-key-file"),
            std::string::npos);
  EXPECT_NE(message(CollectApiKeys({}, "/nonexistent/keys", std::nullopt)).find("cannot read --api-key-file"),
            std::string::npos);
  EXPECT_NE(message(CollectApiKeys({}, "", std::string_view(" , "))).find("HEARTH_API_KEY is set but holds no key"),
            std::string::npos);
}

// The secret is made once per cache directory, private, and read back the same at every
// start; a key's namespace depends on the key and the secret alone.
TEST(ApiKeysTest, NamespacesDependOnTheKeyAndTheCacheDirectorysSecret) {
  const std::string dir = testing::MakeTempDir() + "/cache";
  auto secret = LoadNamespaceSecret(dir);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->size(), 32u);
  struct stat st = {};
  ASSERT_EQ(::stat((dir + "/namespace-secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = LoadNamespaceSecret(dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *secret);
  auto other = LoadNamespaceSecret(testing::MakeTempDir() + "/cache");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *secret);

  const auto ab = MakeApiKeys({"key-alpha", "key-beta"}, *secret);
  const auto b = MakeApiKeys({"key-beta"}, *secret);
  EXPECT_EQ(ab[1].cache_namespace, b[0].cache_namespace) << "not the key's place among the keys";
  EXPECT_NE(ab[0].cache_namespace, ab[1].cache_namespace);
  EXPECT_NE(MakeApiKeys({"key-beta"}, *other)[0].cache_namespace, b[0].cache_namespace);
  EXPECT_EQ(b[0].cache_namespace.size(), 4u + 64u);
  EXPECT_EQ(b[0].cache_namespace.find("beta"), std::string::npos);

  std::ofstream(dir + "/namespace-secret") << "not hex\n";
  EXPECT_EQ(LoadNamespaceSecret(dir).status().code(), StatusCode::kDataLoss);
  auto random = LoadNamespaceSecret("");
  ASSERT_TRUE(random.ok());
  EXPECT_EQ(random->size(), 32u);
}

}  // namespace
}  // namespace hearth::server
