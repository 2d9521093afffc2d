// Test support for the step kernels' GPU tests: deterministic host values
// and BF16 bit conversions (round to nearest even), so that each test
// builds its inputs and its double evaluation from the same numbers.
#pragma once

#include <cstdint>
#include <cstring>

namespace moetune::gpu::testing {

// Deterministic values in [-1, 1) from a 64-bit LCG.
class Values {
 public:
  explicit Values(uint64_t seed) : state_(seed) {}
  float Next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int32_t>(state_ >> 40) - (1 << 23)) /
           8388608.0f;
  }

 private:
  uint64_t state_;
};

inline uint16_t ToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline double FromBf16(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace moetune::gpu::testing
