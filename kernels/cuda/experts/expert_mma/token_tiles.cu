// The gather of grouped_wgmma's token tiles (token_tiles.cuh).
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/experts/expert_mma/token_tiles.cuh"

namespace moetune::gpu {
namespace {

constexpr int kThreads = 256;
using Scan = cub::BlockScan<int, kThreads>;

struct GatherArgs {
  const __half* x16;
  __half* xb;
  const int* meta;
  const int* slot_tok_off;
  const int* slot_ntok;
  const int* tok_list;
  TileTables tables;
  int hidden;
  int slots_meta;  // meta's entry counting the slots planned
};

__device__ __forceinline__ int TilesOf(int ntok) {
  return (ntok + kTileTokens - 1) / kTileTokens;
}

// Block 0: tile_first[0 .. slots] by a block scan, the unit counters reset
// (the previous run's expert kernels finished before this launch), and the
// positions of the slots (theirs come first, in slot order).
__device__ void WriteTileFirst(const GatherArgs& g, int slots,
                               Scan::TempStorage& storage) {
  int carry = 0;
  for (int base = 0; base < slots; base += kThreads) {
    const int s = base + threadIdx.x;
    const int n = s < slots ? TilesOf(g.slot_ntok[s]) : 0;
    int before = 0, total = 0;
    Scan(storage).ExclusiveSum(n, before, total);
    if (s < slots) g.tables.tile_first[s] = carry + before;
    carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    g.tables.tile_first[slots] = carry;
    g.tables.counters[0] = 0;
    g.tables.counters[1] = 0;
    g.tables.counters[kPlannedPositions] =
        slots > 0 ? g.slot_tok_off[slots - 1] + g.slot_ntok[slots - 1] : 0;
  }
}

// The plan, one block: tile_first and the counters (WriteTileFirst), then
// each position's place, tile * kTileTokens + row, written from its slot's
// side (a thread a slot: no search).
__global__ void __launch_bounds__(kThreads)
    PlanTilesKernel(const __grid_constant__ GatherArgs g) {
  __shared__ Scan::TempStorage storage;
  const int slots = g.meta[g.slots_meta];
  WriteTileFirst(g, slots, storage);
  __syncthreads();  // tile_first's global writes, seen by the block
  for (int s = threadIdx.x; s < slots; s += kThreads) {
    const int first = g.tables.tile_first[s], off = g.slot_tok_off[s];
    const int n = g.slot_ntok[s];
    for (int i = 0; i < n; ++i) {
      g.tables.place[off + i] =
          (first + i / kTileTokens) * kTileTokens + i % kTileTokens;
    }
  }
}

// Eight positions a block, their rows stored in B layout: item i is piece
// i / 8 of position i % 8, so the eight lanes of one piece write the eight
// 16-byte rows of a core matrix, one 128-byte line when the positions are
// rows 8 m .. 8 m + 7 of their tile (a block a position would write each
// line in 16-byte parts: 215 us at batch 512). kUnroll items' loads
// are in flight at once.
constexpr int kRowsPerBlock = 8;
constexpr int kUnroll = 4;

__global__ void __launch_bounds__(kThreads)
    GatherTilesKernel(const __grid_constant__ GatherArgs g) {
  __shared__ const __half* src_s[kRowsPerBlock];
  __shared__ int64_t dst_s[kRowsPerBlock];
  const int positions = g.tables.counters[kPlannedPositions], k = g.hidden;
  const int p0 = blockIdx.x * kRowsPerBlock;
  if (p0 >= positions) return;
  if (threadIdx.x < kRowsPerBlock) {
    const int p = min(p0 + static_cast<int>(threadIdx.x), positions - 1);
    const int place = g.tables.place[p], tile = place / kTileTokens,
              n = place % kTileTokens;
    src_s[threadIdx.x] = g.x16 + static_cast<int64_t>(g.tok_list[p]) * k;
    dst_s[threadIdx.x] =
        static_cast<int64_t>(tile) * kTileTokens * k + TilePieceOffset(n, 0, k);
  }
  __syncthreads();
  const int rows = min(kRowsPerBlock, positions - p0);
  const int items = kRowsPerBlock * (k / 8);
  for (int i0 = threadIdx.x; i0 < items; i0 += kThreads * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * kThreads, r = i % kRowsPerBlock;
      const int pc = i / kRowsPerBlock;
      if (i >= items || r >= rows) continue;
      const __half* __restrict__ src = src_s[r] + TilePieceK(pc, 0);
      v[u].x = __ldg(reinterpret_cast<const uint32_t*>(src));
      v[u].y = __ldg(reinterpret_cast<const uint32_t*>(src + 16));
      v[u].z = __ldg(reinterpret_cast<const uint32_t*>(src + 32));
      v[u].w = __ldg(reinterpret_cast<const uint32_t*>(src + 48));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * kThreads, r = i % kRowsPerBlock;
      if (i >= items || r >= rows) continue;
      const int64_t piece = TilePieceOffset(0, i / kRowsPerBlock, k);
      *reinterpret_cast<uint4*>(g.xb + dst_s[r] + piece) = v[u];
    }
  }
}

}  // namespace

GpuStatus LaunchGatherTiles(const LayerArgs& args, const TileTables& tables,
                            __half* xb, int slots_meta, cudaStream_t stream) {
  if (args.geo.max_positions == 0) return OkStatus();
  const GatherArgs g{args.buf.x16,
                     xb,
                     args.buf.meta,
                     args.buf.slot_tok_off,
                     args.buf.slot_ntok,
                     args.buf.tok_list,
                     tables,
                     args.geo.hidden,
                     slots_meta};
  PlanTilesKernel<<<1, kThreads, 0, stream>>>(g);
  MG_CHECK_LAUNCH();
  GatherTilesKernel<<<(args.geo.max_positions + kRowsPerBlock - 1) /
                          kRowsPerBlock,
                      kThreads, 0, stream>>>(g);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace moetune::gpu
