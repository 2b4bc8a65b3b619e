// The disk tier (src/cache/disk_store.h) opening a directory that holds one arbitrary
// file, then reading, writing and evicting around it.
//
// Random bytes almost never carry a right checksum or file name, so the first input byte
// chooses fix-ups that let the rest reach deeper: seal the header checksum, make the
// payload length and checksum match, name the file after its content's key. What must
// hold: Open never fails or crashes on what it finds; Read serves only the state asked
// for (invariant 2); bytes() stays within the budget (invariant 1) and quarantine/ within
// its bound (invariant 3).
#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cache/disk_store.h"
#include "cache/state_file.h"
#include "check.h"

namespace {

namespace fs = std::filesystem;
using hearth::cache::DiskStore;
using hearth::cache::StateHeader;
using hearth::cache::StateKind;
using hearth::cache::Token;
using hearth::fuzz::Check;

constexpr size_t kBudget = 64 << 10;
constexpr size_t kQuarantineFiles = 2;

enum Fixup : uint8_t {
  kSealHeader = 1,    // write the right header checksum where the layout puts it
  kMatchPayload = 2,  // payload length and checksum of the bytes after the header
  kNameByKey = 4,     // name the file after the key of the state it holds
  kStaleTemp = 8,     // also leave a copy under a temporary name, as a crash would
  kForeign = 16,      // open with a namespace prefix the file probably lacks
};

// A fresh directory per process, emptied before each input: tmpfs when there is one,
// since Write fsyncs.
const fs::path& Dir() {
  static const fs::path dir = [] {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("hearth-fuzz-disk-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Where the header checksum goes in `file`, read the way the decoder reads the layout.
std::optional<size_t> ChecksumOffset(const std::string& file) {
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, file.data() + at, 4);
    return v;
  };
  size_t at = 8 + 4 + 4;  // magic, version, kind
  if (file.size() < at + 4) return std::nullopt;
  at += 4 + u32(at);  // namespace
  if (file.size() < at + 4) return std::nullopt;
  at += 4 + static_cast<size_t>(u32(at)) * sizeof(Token);  // tokens
  at += 8 + 8;                                           // payload length and checksum
  if (file.size() < at + 8) return std::nullopt;
  return at;
}

void ApplyFixups(uint8_t fixups, std::string* file) {
  std::optional<size_t> at = ChecksumOffset(*file);
  if (!at) return;
  if (fixups & kMatchPayload) {
    const uint64_t len = file->size() - (*at + 8);
    const uint64_t hash = XXH3_64bits(file->data() + *at + 8, len);
    std::memcpy(file->data() + *at - 16, &len, 8);
    std::memcpy(file->data() + *at - 8, &hash, 8);
  }
  if (fixups & kSealHeader) {
    const uint64_t sum = XXH3_64bits(file->data(), *at);
    std::memcpy(file->data() + *at, &sum, 8);
  }
}

std::string FileName(uint8_t fixups, const std::string& file) {
  if (fixups & kNameByKey) {
    std::istringstream in(file);
    StateHeader h;
    size_t header_size = 0;
    std::string why;
    if (hearth::cache::DecodeStateHeader(in, &h, &header_size, &why)) {
      char name[32];
      std::snprintf(name, sizeof(name), "%016llx.state",
                    static_cast<unsigned long long>(hearth::cache::StateKey(h.ns, h.tokens, h.kind)));
      return name;
    }
  }
  return "00000000000000aa.state";
}

size_t QuarantinedFiles() {
  size_t n = 0;
  for (const auto& de : fs::directory_iterator(Dir() / "quarantine")) n += de.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t fixups = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  ApplyFixups(fixups, &file);

  for (const auto& de : fs::directory_iterator(Dir())) fs::remove_all(de.path());
  const std::string name = FileName(fixups, file);
  std::ofstream(Dir() / name, std::ios::binary).write(file.data(), static_cast<std::streamsize>(file.size()));
  if (fixups & kStaleTemp) std::ofstream(Dir() / (name + ".tmp.1")).write(file.data(), 3);

  DiskStore::Options options;
  options.quarantine_files = kQuarantineFiles;
  auto opened = DiskStore::Open(Dir().string(), kBudget, (fixups & kForeign) ? "hearth|" : "", options);
  Check(opened.ok(), "Open succeeds whatever the directory holds");
  DiskStore& store = **opened;
  Check(store.Scan().size() <= 1, "Scan lists at most the one file");
  Check(!fs::exists(Dir() / (name + ".tmp.1")), "Open removes interrupted writes");

  const std::vector<DiskStore::Entry> found = store.Scan();
  for (const DiskStore::Entry& e : found) {
    // Another namespace, or the same tokens as another kind, is never served this file.
    Check(!store.Read(e.key, e.ns + "x", e.tokens, e.kind).ok(), "Read refuses another namespace");
    auto got = store.Read(e.key, e.ns, e.tokens, e.kind);
    if (got.ok()) {
      Check(got->size() <= e.bytes, "Read returns the payload, no more");
    } else {
      Check(got.status().code() == hearth::StatusCode::kDataLoss || got.status().code() == hearth::StatusCode::kNotFound,
            "a bad file is data loss");
    }
  }

  // New states push the found one out of the budget; each reads back as written.
  const std::vector<uint8_t> payload(kBudget / 3, fixups);
  for (int i = 0; i < 4; ++i) {
    const std::vector<Token> tokens = {i, static_cast<Token>(size)};
    auto key = store.Write("n", tokens, StateKind::kFull, payload);
    Check(key.ok(), "a state within the budget is written");
    Check(store.bytes() <= store.budget(), "bytes() stays within the budget");
    auto back = store.Read(*key, "n", tokens, StateKind::kFull);
    Check(back.ok() && *back == payload, "a written state reads back");
  }
  store.Flush();
  Check(QuarantinedFiles() <= kQuarantineFiles, "quarantine/ stays within its bound");
  return 0;
}
