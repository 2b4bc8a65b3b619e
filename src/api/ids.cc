#include "api/ids.h"

#include <random>

namespace hearth::api {

std::string NewId(std::string_view prefix) {
  static constexpr char kAlphabet[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  // Seeded once per thread from the OS (128 bits, so threads do not share streams); a
  // shared generator would need a lock.
  thread_local std::mt19937_64 rng = [] {
    std::random_device os;
    std::seed_seq seed{os(), os(), os(), os()};
    return std::mt19937_64(seed);
  }();
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace hearth::api
