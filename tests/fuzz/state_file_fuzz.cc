// The disk tier's header decoder (src/cache/state_file.h) over arbitrary bytes: it never
// crashes or reads past the bytes it has, and a header it accepts is one the encoder
// writes byte for byte.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "cache/state_file.h"
#include "check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::istringstream in(bytes);
  hearth::cache::StateHeader h;
  size_t header_size = 0;
  std::string why;
  if (!hearth::cache::DecodeStateHeader(in, &h, &header_size, &why)) {
    Check(!why.empty(), "a refused header says why");
    return 0;
  }
  Check(header_size <= size, "the header lies inside the bytes read");
  Check(h.kind == hearth::cache::StateKind::kDevice || h.kind == hearth::cache::StateKind::kFull ||
            h.kind == hearth::cache::StateKind::kPartial,
        "the kind is a known one");
  Check(hearth::cache::EncodeStateHeader(h) == bytes.substr(0, header_size),
        "an accepted header is what EncodeStateHeader writes for it");
  return 0;
}
