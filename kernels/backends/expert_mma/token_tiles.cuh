// Token tiles of grouped_wgmma: the positions of each slot (the router's
// token-slot pairs, grouped by expert) cut into tiles of kTileTokens, and
// their activations stored as wgmma's B operand, so that one TMA bulk copy
// per 8 tokens moves a tile's K step into shared memory as the tensor cores
// read it.
//
// B layout of one tile (fp16, K = the matrix's K): for token n (group ng =
// n / 8, row r = n % 8) and K index i, with the tiled NVFP4 layout's K order
// inside a 64-K chunk (tiled_nvfp4.h: lane c's mma step m reads K 16 c + 4 m
// + {0, 1} as logical k 2 c + {0, 1}, and 16 c + 4 m + {2, 3} as 8 + 2 c +
// {0, 1}): k16 step j = 4 (i / 64) + (i % 16) / 4, logical k = 8 kh + 2 c + e
// (c = i % 64 / 16, kh = i % 4 / 2, e = i % 2); core matrices of 8 rows x 8
// halves (128 bytes), the two K halves of a step 128 bytes apart, steps 256
// bytes apart, token groups 16 K bytes apart. Device-side; included by .cu
// files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/layer.cuh"

namespace moetune::gpu {

// Tokens per tile: the widest wgmma N the expert kernels instantiate.
inline constexpr int kTileTokens = 32;
inline constexpr int kTileGroups = kTileTokens / 8;

// Half offset of (token n, K index i) inside a tile of K `k`.
__device__ __forceinline__ int64_t TileBOffset(int n, int i, int k) {
  const int o = i % 64, j = (i / 64) * 4 + (o % 16) / 4;
  const int kh = (o % 4) / 2, kk = 2 * (o / 16) + o % 2;
  return ((static_cast<int64_t>(n / 8) * (k / 16) + j) * 2 + kh) * 64 +
         (n % 8) * 8 + kk;
}

// An upper bound of the tiles of a run: every slot's last tile may be
// partial.
inline int TileBound(const Geometry& g) {
  return g.max_slots + (g.max_positions + kTileTokens - 1) / kTileTokens;
}

struct TileTables {
  int* tile_first = nullptr;  // [max_slots + 1]: slot s's first tile; [slots]
                              // = the run's tiles
  int* counters = nullptr;    // [2]: next unit of gate_up, of down
  int* place = nullptr;       // [max_positions]: tile * kTileTokens + row
};

// After the router: tile_first, the counters reset to 0, each position's
// place, and every position's input row (x16) stored in its tile (`xb`:
// [tiles][kTileTokens * hidden] in B layout). A one-block plan, then eight
// positions a block.
GpuStatus LaunchGatherTiles(const LayerArgs& args, const TileTables& tables,
                            __half* xb, cudaStream_t stream);

}  // namespace moetune::gpu
