// Where grouped_wgmma's token tiles keep a token's activations: wgmma's B
// operand (K-major, no swizzle) in the tiled NVFP4 layout's K order, so
// that B and the weights' A fragments (tiled_nvfp4.h) agree on every k.
// Plain C++ with MOETUNE_HD: host tests check it; kernels use it. Pure
// functions; thread-safe.
//
// A tile holds kTileTokens tokens of one slot. For token n (group n / 8,
// row n % 8) and K index i: the k16 step j = 4 (i / 64) + (i % 16) / 4 of
// its 64-K chunk, and inside the step the logical k = 8 kh + 2 c + e, with
// c = i % 64 / 16, kh = i % 4 / 2, e = i % 2 (tiled_nvfp4.h: lane c's mma j
// reads chunk columns 16 c + 4 j + 2 kh + e as k 8 kh + 2 c + e). Core
// matrices of 8 rows x 8 halves (128 bytes); a step's two K halves (kh) 128
// bytes apart; steps 256 bytes apart; token groups 16 K bytes apart.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace moetune::gpu {

// Tokens per tile: the widest wgmma N the expert kernels instantiate.
inline constexpr int kTileTokens = 32;
inline constexpr int kTileGroups = kTileTokens / 8;

// Half offset of (token n, K index i) inside a tile of K `k`.
MOETUNE_HD int64_t TileBOffset(int n, int i, int k) {
  const int o = i % 64, j = (i / 64) * 4 + (o % 16) / 4;
  const int kh = (o % 4) / 2, kk = 2 * (o / 16) + o % 2;
  return ((static_cast<int64_t>(n / 8) * (k / 16) + j) * 2 + kh) * 64 +
         (n % 8) * 8 + kk;
}

// A tile row is stored in 16-byte pieces, piece pc = the K half pc % 2 of
// step pc / 2: the K index of its kk-th half (0..7), and the half offset of
// token n's piece pc inside a tile of K `k` (the gather's two sides).
MOETUNE_HD int TilePieceK(int pc, int kk) {
  const int j = pc / 2;
  return (j / 4) * 64 + (j % 4) * 4 + 2 * (pc % 2) + 16 * (kk / 2) + kk % 2;
}
MOETUNE_HD int64_t TilePieceOffset(int n, int pc, int k) {
  return static_cast<int64_t>(n / 8) * 8 * k + (n % 8) * 8 +
         static_cast<int64_t>(pc) * 64;
}

}  // namespace moetune::gpu
