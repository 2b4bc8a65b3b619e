#include "mkmodel/tensor_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"

namespace hearth::mkmodel {
namespace {

// Elements drawn and written per step: bounds the writer's memory (~384 KiB).
constexpr size_t kChunk = size_t{1} << 16;

// SplitMix64 (Steele, Lea, Flood 2014): one add and two multiply-xorshifts per output.
uint64_t NextSplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a over the name, so every tensor gets its own stream.
uint64_t HashName(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

class ValueStream {
 public:
  ValueStream(const TensorSpec& tensor, uint64_t seed) : fill_(tensor.fill) {
    uint64_t s = seed;
    state_ = NextSplitMix(s) ^ HashName(tensor.name);
    if (fill_.kind == Fill::Kind::kNegLogUniform) {
      log_a_ = std::log(fill_.a);
      log_b_ = std::log(fill_.b);
    }
  }

  void Next(float* out, size_t n) {
    switch (fill_.kind) {
      case Fill::Kind::kConstant:
        for (size_t i = 0; i < n; ++i) out[i] = fill_.a;
        return;
      case Fill::Kind::kUniform:
        for (size_t i = 0; i < n; ++i) out[i] = fill_.a + (fill_.b - fill_.a) * NextUnit();
        return;
      case Fill::Kind::kNegLogUniform:
        for (size_t i = 0; i < n; ++i) out[i] = -std::exp(log_a_ + (log_b_ - log_a_) * NextUnit());
        return;
    }
  }

 private:
  // Uniform in [0, 1), from the top 24 bits (a float's precision).
  float NextUnit() {
    return static_cast<float>(NextSplitMix(state_) >> 40) * (1.0f / 16777216.0f);
  }

  Fill fill_;
  uint64_t state_ = 0;
  float log_a_ = 0.0f;
  float log_b_ = 0.0f;
};

Status WriteBytes(std::FILE* file, const void* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, file) != n) {
    return Internal(std::string("write failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

uint64_t TensorDataBytes(const TensorSpec& tensor) {
  const uint64_t element_size = tensor.type == DType::kF16 ? 2 : 4;
  return static_cast<uint64_t>(tensor.NumElements()) * element_size;
}

void DrawValues(const TensorSpec& tensor, uint64_t seed, float* out, size_t n) {
  ValueStream(tensor, seed).Next(out, n);
}

Status WriteTensorData(std::FILE* file, const TensorSpec& tensor, uint64_t seed, size_t alignment) {
  ValueStream stream(tensor, seed);
  std::vector<float> values(kChunk);
  std::vector<ggml_fp16_t> halves(tensor.type == DType::kF16 ? kChunk : 0);

  size_t remaining = static_cast<size_t>(tensor.NumElements());
  while (remaining > 0) {
    const size_t n = remaining < kChunk ? remaining : kChunk;
    stream.Next(values.data(), n);
    if (tensor.type == DType::kF16) {
      ggml_fp32_to_fp16_row(values.data(), halves.data(), static_cast<int64_t>(n));
      HEARTH_RETURN_IF_ERROR(WriteBytes(file, halves.data(), n * sizeof(ggml_fp16_t)));
    } else {
      HEARTH_RETURN_IF_ERROR(WriteBytes(file, values.data(), n * sizeof(float)));
    }
    remaining -= n;
  }

  const uint64_t bytes = TensorDataBytes(tensor);
  const size_t pad = static_cast<size_t>((alignment - bytes % alignment) % alignment);
  static const char kZeros[256] = {};
  if (pad > sizeof(kZeros)) return Internal("GGUF alignment above 256 bytes is not supported");
  return WriteBytes(file, kZeros, pad);
}

}  // namespace hearth::mkmodel
