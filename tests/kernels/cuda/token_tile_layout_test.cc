// grouped_wgmma's token-tile B layout (kernels/cuda/experts/expert_mma/
// token_tile_layout.h) on the CPU: every (token, K) has its own half inside
// the tile; B's logical k of each wgmma k16 step holds the same K column as
// the weights' A fragment (tiled_nvfp4.h ElementCol) of that step; and the
// gather's 16-byte pieces land exactly where TileBOffset says.
#include "kernels/cuda/experts/expert_mma/token_tile_layout.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/tiled_nvfp4.h"

namespace moetune::gpu {
namespace {

constexpr int kK = 256;  // four 64-K chunks

TEST(TokenTileLayoutTest, EveryTokenAndKHasItsOwnHalf) {
  std::vector<int> hits(static_cast<size_t>(kTileTokens) * kK, 0);
  for (int n = 0; n < kTileTokens; ++n) {
    for (int i = 0; i < kK; ++i) {
      const int64_t at = TileBOffset(n, i, kK);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, static_cast<int64_t>(hits.size()));
      ++hits[static_cast<size_t>(at)];
    }
  }
  for (int h : hits) EXPECT_EQ(h, 1);
}

// wgmma reads B's k16 step s as core matrices: K half kh (128 bytes apart),
// row n % 8 (16 bytes apart), logical k 8 kh + kk at half kk; token groups
// 16 K bytes apart. Lane c's A word m of chunk q holds chunk columns
// ElementCol(c, m, r, e) as logical k 2 c + e (r < 2) or 8 + 2 c + e.
TEST(TokenTileLayoutTest, BHoldsTheColumnsTheWeightsFragmentsUse) {
  for (int n = 0; n < kTileTokens; ++n) {
    for (int q = 0; q < kK / 64; ++q) {
      for (int m = 0; m < 4; ++m) {
        for (int c = 0; c < 4; ++c) {
          for (int r = 0; r < 4; r += 2) {
            for (int e = 0; e < 2; ++e) {
              const int kh = r / 2, k_logical = 8 * kh + 2 * c + e;
              const int column = 64 * q + tiled::ElementCol(c, m, r, e);
              const int64_t want =
                  static_cast<int64_t>(n / 8) * (kK / 16) * 128 +
                  (4 * q + m) * 128 + (k_logical / 8) * 64 + (n % 8) * 8 +
                  k_logical % 8;
              EXPECT_EQ(TileBOffset(n, column, kK), want)
                  << "n " << n << " q " << q << " m " << m << " c " << c
                  << " r " << r << " e " << e;
            }
          }
        }
      }
    }
  }
}

TEST(TokenTileLayoutTest, TheGathersPiecesLandWhereTheLayoutSays) {
  for (int n = 0; n < kTileTokens; ++n) {
    for (int pc = 0; pc < kK / 8; ++pc) {
      for (int kk = 0; kk < 8; ++kk) {
        EXPECT_EQ(TilePieceOffset(n, pc, kK) + kk,
                  TileBOffset(n, TilePieceK(pc, kk), kK))
            << "n " << n << " pc " << pc << " kk " << kk;
      }
    }
  }
}

}  // namespace
}  // namespace moetune::gpu
