// Internal to mkmodel: turns a TensorSpec's fill rule into bytes in a GGUF data section.
//
// Each tensor draws from its own pseudo-random stream, seeded from (seed, tensor name), so
// a tensor's bytes depend on nothing else: not on the other tensors, their order, or how
// the writer chunks its work. Not cryptographic; chosen for speed (about a nanosecond per
// element), since the small preset has ~10^9 of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "base/status.h"
#include "mkmodel/model_spec.h"

namespace hearth::mkmodel {

// Bytes of the tensor's data, before padding.
uint64_t TensorDataBytes(const TensorSpec& tensor);

// Appends the tensor's data to `file`, then zeros up to a multiple of `alignment` bytes:
// the layout of a GGUF data section, where each tensor starts aligned. Uses O(1) memory
// whatever the tensor's size. On failure the file holds a partial write.
// REQUIRES: `file` is open for writing.
Status WriteTensorData(std::FILE* file, const TensorSpec& tensor, uint64_t seed, size_t alignment);

// The stream behind WriteTensorData, exposed for tests: fills out[0, n) with the first n
// values the tensor would hold, before rounding to its type.
void DrawValues(const TensorSpec& tensor, uint64_t seed, float* out, size_t n);

}  // namespace hearth::mkmodel
