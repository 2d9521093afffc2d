// Token tiles of grouped_wgmma: the positions of each slot (the router's
// token-slot pairs, grouped by expert) cut into tiles of kTileTokens, and
// their activations stored as wgmma's B operand, so that one TMA bulk copy
// per 8 tokens moves a tile's K step into shared memory as the tensor cores
// read it.
//
// The B layout of a tile is token_tile_layout.h's. Device-side; included
// by .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/experts/expert_mma/token_tile_layout.h"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

// An upper bound of the tiles of a run: every slot's last tile may be
// partial.
inline int TileBound(const Geometry& g) {
  return g.max_slots + (g.max_positions + kTileTokens - 1) / kTileTokens;
}

// counters[]: the next unit of gate_up, of down (indexed by the expert
// kernels' mode, 0 and 1), and the positions the plan covers.
inline constexpr int kTileCounters = 3, kPlannedPositions = 2;

struct TileTables {
  int* tile_first = nullptr;  // [max_slots + 1]: slot s's first tile; [slots]
                              // = the run's tiles
  int* counters = nullptr;    // [kTileCounters]
  int* place = nullptr;       // [max_positions]: tile * kTileTokens + row
};

// After the router, over its first meta[slots_meta] slots (kMetaSlots: all;
// kMetaWide: the wide ones, which lead the list, their positions first):
// tile_first, the unit counters reset to 0, the positions covered, each
// position's place, and every covered position's input row (x16) stored in
// its tile (`xb`: [tiles][kTileTokens * hidden] in B layout). A one-block
// plan, then eight positions a block.
GpuStatus LaunchGatherTiles(const LayerArgs& args, const TileTables& tables,
                            __half* xb, int slots_meta, cudaStream_t stream);

}  // namespace moetune::gpu
