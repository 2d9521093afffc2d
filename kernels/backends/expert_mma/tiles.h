// The tile shapes the expert-MMA family is instantiated for: X(block_n,
// block_k) per tile, the first each backend's default. The kernels expand
// these lists into their template instantiations and the descriptors into
// their tile lists, so a tile the tuner may schedule is a tile that exists.
// Plain C++ macros; included by .cu and .cc files alike.
#pragma once

#define MOETUNE_FUSED_GEMV_TILES(X) X(16, 256) X(16, 512) X(32, 256)
#define MOETUNE_FUSED_GEMV_FP8_TILES(X) \
  X(128, 512) X(128, 256) X(128, 128) X(256, 256)
#define MOETUNE_GROUPED_MMA_TILES(X) X(64, 64) X(128, 64) X(64, 128)
// grouped_wgmma's carry the ring's depth too: X(block_n, block_k, stages),
// 0 for the depth its shared-memory budget gives (3 at 128x256 with 2
// blocks an SM, 2 at 128x128 with 4); the others trade blocks an SM for
// stages in flight (128x256s2: 3 blocks; 128x128s4: 3; 128x256s6: 1).
#define MOETUNE_GROUPED_WGMMA_TILES(X) \
  X(128, 256, 0)                       \
  X(256, 256, 0) X(128, 128, 0) X(128, 256, 2) X(128, 128, 4) X(128, 256, 6)

// For the descriptors: one Tile{block_n, block_k} array element, and one
// Tile{block_n, block_k, stages}.
#define MOETUNE_TILE_ELEMENT(n, k) ::moetune::backends::Tile{n, k},
#define MOETUNE_STAGED_TILE_ELEMENT(n, k, s) ::moetune::backends::Tile{n, k, s},

// fused_gemv_wgmma's tiles are fused_gemv's (its narrow kernels'); its wide
// slots run grouped_wgmma's kernel at this one tile, grouped_wgmma's fastest
// at every serving batch measured (kernels/cuda/moe/PERF.md).
namespace moetune::backends {
inline constexpr int kWideWgmmaBlockN = 128, kWideWgmmaBlockK = 256;
}  // namespace moetune::backends
