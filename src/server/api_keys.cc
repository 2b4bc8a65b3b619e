#include "server/api_keys.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hearth::server {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSecretFile = "namespace-secret";
constexpr size_t kSecretBytes = 32;

std::string Trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// A key goes in an HTTP header: no whitespace, no control characters.
Status CheckKey(const std::string& key, const std::string& source) {
  if (key.empty()) return InvalidArgument(source + " gives an empty API key");
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) return InvalidArgument(source + " gives an API key with whitespace or control characters");
  }
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ReadKeyFile(const std::string& path) {
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument("cannot read --api-key-file " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return InvalidArgument("--api-key-file " + path + " can be read by other users (mode " + mode +
                           "); make it private: chmod 600 " + path);
  }
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read --api-key-file " + path + ": " + std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string key = Trim(line);
    if (key.empty() || key.starts_with('#')) continue;
    HEARTH_RETURN_IF_ERROR(CheckKey(key, "line " + std::to_string(n) + " of --api-key-file " + path));
    keys.push_back(key);
  }
  if (keys.empty()) return InvalidArgument("--api-key-file " + path + " holds no key");
  return keys;
}

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xF];
  }
  return out;
}

StatusOr<std::string> RandomSecret() {
  std::string secret(kSecretBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()), static_cast<int>(secret.size())) != 1) {
    return Unavailable("cannot draw random bytes for the namespace secret");
  }
  return secret;
}

StatusOr<std::string> ReadSecret(const std::string& path) {
  struct stat st = {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    std::fprintf(stderr, "hearth: warning: %s can be read by other users; chmod 600 it\n", path.c_str());
  }
  std::ifstream in(path);
  if (!in) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = Trim(ss.str());
  const bool hex = text.size() == 2 * kSecretBytes &&
                   std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  if (!hex) {
    return DataLoss(path + " does not hold a namespace secret (64 hex digits); delete it to make a new one "
                    "(the disk states of every API key become unreachable)");
  }
  std::string secret(kSecretBytes, '\0');
  for (size_t i = 0; i < kSecretBytes; ++i) secret[i] = static_cast<char>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  return secret;
}

// Writes a new secret to a private temporary file and links it into place, so that a crash
// never leaves a partial secret and two servers starting at once agree on one.
Status CreateSecret(const std::string& path) {
  auto secret = RandomSecret();
  if (!secret.ok()) return secret.status();
  const std::string text = Hex(reinterpret_cast<const unsigned char*>(secret->data()), secret->size()) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  const bool linked = written && (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST);
  const int err = errno;
  ::unlink(tmp.c_str());
  if (!linked) return Unavailable("cannot create " + path + ": " + std::strerror(err));
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> CollectApiKeys(const std::vector<std::string>& from_flags, const std::string& file,
                                                  std::optional<std::string_view> env) {
  std::vector<std::string> keys;
  for (const std::string& k : from_flags) {
    HEARTH_RETURN_IF_ERROR(CheckKey(k, "--api-key"));
    keys.push_back(k);
  }
  if (!file.empty()) {
    auto from_file = ReadKeyFile(file);
    if (!from_file.ok()) return from_file.status();
    keys.insert(keys.end(), from_file->begin(), from_file->end());
  }
  if (env && !env->empty()) {
    size_t n_env = 0;
    std::string_view rest = *env;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string key = Trim(rest.substr(0, comma));
      if (!key.empty()) {
        HEARTH_RETURN_IF_ERROR(CheckKey(key, "HEARTH_API_KEY"));
        keys.push_back(key);
        ++n_env;
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (n_env == 0) return InvalidArgument("HEARTH_API_KEY is set but holds no key");
  }
  std::vector<std::string> unique;
  for (std::string& k : keys) {
    if (std::find(unique.begin(), unique.end(), k) == unique.end()) unique.push_back(std::move(k));
  }
  return unique;
}

StatusOr<std::string> LoadNamespaceSecret(const std::string& cache_dir) {
  if (cache_dir.empty()) return RandomSecret();
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return Unavailable("cannot create cache directory " + cache_dir + ": " + ec.message());
  const std::string path = (fs::path(cache_dir) / kSecretFile).string();
  if (!fs::exists(path, ec)) HEARTH_RETURN_IF_ERROR(CreateSecret(path));
  return ReadSecret(path);
}

std::vector<ApiKey> MakeApiKeys(const std::vector<std::string>& keys, const std::string& secret) {
  std::vector<ApiKey> out;
  for (const std::string& k : keys) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(k.data()),
         k.size(), mac, &len);
    out.push_back({k, "key-" + Hex(mac, len)});
  }
  return out;
}

}  // namespace hearth::server
