// The E4M3 variant of the tiled layout (kernels/cuda/moe/tiled_e4m3.h) on the
// CPU: every bit used once, codes read back, and the decoded bytes, read as
// FP8 E4M3, equal E2M1 * 2^-6 in their place and zero everywhere else.
#include "kernels/cuda/moe/tiled_e4m3.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu::tiled_e4m3 {
namespace {

TEST(TiledE4m3Test, EveryBitOfAWordBelongsToExactlyOneElement) {
  uint32_t seen = 0;
  for (int r8 = 0; r8 < 2; ++r8) {
    for (int b = 0; b < 4; ++b) {
      const uint32_t bits = PlaceCode(0xF, r8, b);
      EXPECT_EQ(__builtin_popcount(bits), 4) << "r8=" << r8 << " b=" << b;
      EXPECT_EQ(seen & bits, 0u) << "r8=" << r8 << " b=" << b;
      seen |= bits;
    }
  }
  EXPECT_EQ(seen, 0xFFFFFFFFu);
}

TEST(TiledE4m3Test, PlacedCodesReadBack) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 1000; ++trial) {
    uint32_t codes[2][4], word = 0;
    for (int r8 = 0; r8 < 2; ++r8) {
      for (int b = 0; b < 4; ++b) {
        codes[r8][b] = rng() & 15u;
        word |= PlaceCode(codes[r8][b], r8, b);
      }
    }
    for (int r8 = 0; r8 < 2; ++r8) {
      for (int b = 0; b < 4; ++b) ASSERT_EQ(CodeAt(word, r8, b), codes[r8][b]);
    }
  }
}

TEST(TiledE4m3Test, DecodeGivesE2M1TimesTwoToTheMinus6) {
  for (int r8 = 0; r8 < 2; ++r8) {
    for (int b = 0; b < 4; ++b) {
      for (uint32_t code = 0; code < 16; ++code) {
        uint32_t regs[2];
        DecodeWord(PlaceCode(code, r8, b), &regs[0], &regs[1]);
        const float want = nvfp4::E2M1ToFloat(code) * std::ldexp(1.0f, -6);
        EXPECT_EQ(nvfp4::E4M3ToFloat((regs[r8] >> (8 * b)) & 0xFF), want)
            << "r8=" << r8 << " b=" << b << " code=" << code;
        // Nothing leaks into the other seven bytes (+0 or -0 only).
        for (int r2 = 0; r2 < 2; ++r2) {
          for (int b2 = 0; b2 < 4; ++b2) {
            if (r2 == r8 && b2 == b) continue;
            EXPECT_EQ(nvfp4::E4M3ToFloat((regs[r2] >> (8 * b2)) & 0xFF), 0.0f);
          }
        }
      }
    }
  }
  // Hand-computed: 0xF (-6.0) in row g, byte 0 -> sign | exponent 3 |
  // mantissa .100 = 0x9C; 0x1 (0.5) -> E4M3's subnormal 2^-7 = 0x04.
  uint32_t lo, hi;
  DecodeWord(PlaceCode(0xF, 0, 0), &lo, &hi);
  EXPECT_EQ(lo, 0x9Cu);
  DecodeWord(PlaceCode(0x1, 1, 3), &lo, &hi);
  EXPECT_EQ(hi, 0x04000000u);
}

}  // namespace
}  // namespace moetune::gpu::tiled_e4m3
