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
#define MOETUNE_GROUPED_WGMMA_TILES(X) X(128, 256) X(256, 256) X(128, 128)

// For the descriptors: one Tile{block_n, block_k} array element.
#define MOETUNE_TILE_ELEMENT(n, k) ::moetune::backends::Tile{n, k},

// fused_gemv_wgmma's tiles are fused_gemv's (its narrow kernels'); its wide
// slots run grouped_wgmma's kernel at this one tile, grouped_wgmma's fastest
// at every serving batch measured (kernels/PERF.md).
namespace moetune::backends {
inline constexpr int kWideWgmmaBlockN = 128, kWideWgmmaBlockK = 256;
}  // namespace moetune::backends
