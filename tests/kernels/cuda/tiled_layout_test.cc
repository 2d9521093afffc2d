// The tiled NVFP4 layout and its bit-trick decode
// (kernels/cuda/moe/tiled_nvfp4.h) on the CPU: every bit used once, the fp16
// patterns equal E2M1 * 2^-14, and an emulation of mma.m16n8k16's fragment
// ownership gives the plain dot product, i.e. the A (weights) and B
// (activations) k orders agree.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/tiled_nvfp4.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu::tiled {
namespace {

float Fp16ToFloat(uint32_t bits) {
  const int sign = (bits >> 15) & 1, exponent = (bits >> 10) & 31,
            mantissa = bits & 1023;
  const float magnitude =
      exponent == 0
          ? std::ldexp(static_cast<float>(mantissa), -24)
          : std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  return sign ? -magnitude : magnitude;
}

TEST(TiledLayoutTest, EveryBitOfAWordBelongsToExactlyOneElement) {
  uint32_t seen = 0;
  for (int r = 0; r < 4; ++r) {
    for (int h = 0; h < 2; ++h) {
      const uint32_t bits = PlaceCode(0xF, r, h);
      EXPECT_EQ(__builtin_popcount(bits), 4) << "r=" << r << " h=" << h;
      EXPECT_EQ(seen & bits, 0u) << "r=" << r << " h=" << h;
      seen |= bits;
    }
  }
  EXPECT_EQ(seen, 0xFFFFFFFFu);
}

TEST(TiledLayoutTest, PlacedCodesReadBack) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    uint32_t codes[4][2], word = 0;
    for (int r = 0; r < 4; ++r) {
      for (int h = 0; h < 2; ++h) {
        codes[r][h] = rng() & 15u;
        word |= PlaceCode(codes[r][h], r, h);
      }
    }
    for (int r = 0; r < 4; ++r) {
      for (int h = 0; h < 2; ++h) ASSERT_EQ(CodeAt(word, r, h), codes[r][h]);
    }
  }
}

TEST(TiledLayoutTest, DecodeGivesE2M1TimesTwoToTheMinus14) {
  for (int r = 0; r < 4; ++r) {
    for (int h = 0; h < 2; ++h) {
      for (uint32_t code = 0; code < 16; ++code) {
        uint32_t out[4];
        DecodeWord(PlaceCode(code, r, h), out);
        const float want = nvfp4::E2M1ToFloat(code) * std::ldexp(1.0f, -14);
        EXPECT_EQ(Fp16ToFloat((out[r] >> (16 * h)) & 0xFFFF), want)
            << "r=" << r << " h=" << h << " code=" << code;
        // Nothing leaks into the other seven halves (+0 or -0 only).
        for (int r2 = 0; r2 < 4; ++r2) {
          for (int h2 = 0; h2 < 2; ++h2) {
            if (r2 == r && h2 == h) continue;
            EXPECT_EQ(Fp16ToFloat((out[r2] >> (16 * h2)) & 0xFFFF), 0.0f);
          }
        }
      }
    }
  }
  // Hand-computed: code 0x7 (6.0) -> 6 * 2^-14; 0xF (-6.0); 0x1 (0.5) is the
  // fp16 subnormal 2^-15 = 0x0200.
  uint32_t out[4];
  DecodeWord(PlaceCode(0x1, 0, 0), out);
  EXPECT_EQ(out[0] & 0xFFFF, 0x0200u);
  DecodeWord(PlaceCode(0xF, 0, 0), out);
  EXPECT_EQ(out[0] & 0xFFFF, 0x8E00u);  // sign | exponent 3 | mantissa .1
}

TEST(TiledLayoutTest, OffsetsAndSizes) {
  EXPECT_EQ(ChunksOf(6144), 96);
  EXPECT_EQ(GroupsOf(6144), 24);
  EXPECT_EQ(GroupsOf(128), 1);  // 2 chunks, padded to one group
  // [4096, 6144]: 4.5 bits a weight; scales exactly one byte per 16.
  EXPECT_EQ(CodeBytesOf(4096, 6144), int64_t{4096} * 6144 / 2);
  EXPECT_EQ(ScaleBytesOf(4096, 6144), int64_t{4096} * 6144 / 16);
  EXPECT_EQ(CodeOffset(1, 2, 3, 96), ((1 * 96 + 2) * 32 + 3) * 16);
  EXPECT_EQ(ScaleOffset(1, 6, 3, 24), ((1 * 24 + 1) * 32 + 3) * 8 + 2 * 2);
}

// One 16 x 64 chunk packed as the generator does, multiplied as the kernel
// does (fragment ownership of mma.m16n8k16), against the plain dot product.
TEST(TiledLayoutTest, MmaEmulationEqualsPlainDotProduct) {
  std::mt19937 rng(11);
  uint8_t code[16][64], scale[16][4];
  float x[8][64];
  for (auto& row : code)
    for (auto& v : row) v = rng() & 15u;
  for (auto& row : scale)
    for (auto& v : row)
      v = static_cast<uint8_t>((5 + rng() % 4) << 3 | (rng() & 7));
  for (auto& row : x)
    for (auto& v : row)
      v = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
  // Pack: lane (g, c), word j, element (r, h).
  uint32_t words[32][4] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < 4; ++r) {
        for (int h = 0; h < 2; ++h) {
          const int row = ElementRow(lane / 4, r),
                    col = ElementCol(lane % 4, j, r, h);
          words[lane][j] |= PlaceCode(code[row][col], r, h);
        }
      }
    }
  }
  double d[16][8] = {};
  for (int j = 0; j < 4; ++j) {
    // A[m][kk] and B[kk][n] as the hardware distributes them.
    float a[16][16], b[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, c = lane % 4;
      uint32_t regs[4];
      DecodeWord(words[lane][j], regs);
      for (int reg = 0; reg < 4; ++reg) {
        for (int h = 0; h < 2; ++h) {
          const int m = g + 8 * (reg & 1), kk = 2 * c + h + 8 * (reg >> 1);
          const float s = nvfp4::E4M3ToFloat(scale[m][c]);
          a[m][kk] = Fp16ToFloat((regs[reg] >> (16 * h)) & 0xFFFF) * s;
          // B regs: b0 = halves (4j, 4j+1) of the lane's 16 columns, b1 =
          // (4j + 2, 4j + 3); token n = g.
          if (reg < 2)
            b[2 * c + h + 8 * reg][g] = x[g][16 * c + 4 * j + 2 * reg + h];
        }
      }
    }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n)
        for (int kk = 0; kk < 16; ++kk)
          d[m][n] += static_cast<double>(a[m][kk]) * b[kk][n];
  }
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      double want = 0;
      for (int col = 0; col < 64; ++col) {
        want += nvfp4::E2M1ToFloat(code[m][col]) *
                nvfp4::E4M3ToFloat(scale[m][col / 16]) *
                static_cast<double>(x[n][col]);
      }
      EXPECT_NEAR(d[m][n] * 16384.0, want, 1e-9 * (1 + std::fabs(want)))
          << m << "," << n;
    }
  }
}

}  // namespace
}  // namespace moetune::gpu::tiled
