// The gather of grouped_wgmma's token tiles (token_tiles.cuh).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/backends/expert_mma/token_tiles.cuh"

namespace moetune::gpu {
namespace {

constexpr int kThreads = 256;
using Scan = cub::BlockScan<int, kThreads>;
using Reduce = cub::BlockReduce<int, kThreads>;

struct GatherArgs {
  const __half* x16;
  __half* xb;
  const int* meta;
  const int* slot_tok_off;
  const int* slot_ntok;
  const int* tok_list;
  TileTables tables;
  int hidden;
};

__device__ __forceinline__ int TilesOf(int ntok) {
  return (ntok + kTileTokens - 1) / kTileTokens;
}

// Block 0: tile_first[0 .. slots] by a block scan, and the counters reset
// (the previous run's expert kernels finished before this launch).
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
  }
}

// A thread's slots: s = threadIdx.x + kThreads * j (a run has at most
// kThreads * kSlotsPerThread slots; grouped_wgmma refuses more).
constexpr int kSlotsPerThread = 2;

// Position p's slot and that slot's first tile, in two block-wide steps
// (each thread reads its slots' offsets and counts at once): a serial
// search and a sum over the slots before cost a dozen dependent round trips
// a block (device run 35: 64 us at batch 128).
__device__ void PlacePosition(const GatherArgs& g, int slots, int p,
                              Reduce::TempStorage& st, int* slot_s,
                              int* first_s) {
  int off[kSlotsPerThread], ntok[kSlotsPerThread];
#pragma unroll
  for (int j = 0; j < kSlotsPerThread; ++j) {
    const int s = threadIdx.x + kThreads * j;
    off[j] = s < slots ? g.slot_tok_off[s] : 0;
    ntok[j] = s < slots ? g.slot_ntok[s] : 0;
    if (ntok[j] > 0 && off[j] <= p && p < off[j] + ntok[j]) *slot_s = s;
  }
  __syncthreads();
  const int mine_s = *slot_s;
  int tiles = 0;
#pragma unroll
  for (int j = 0; j < kSlotsPerThread; ++j) {
    if (threadIdx.x + kThreads * j < mine_s) tiles += TilesOf(ntok[j]);
  }
  const int first = Reduce(st).Sum(tiles);
  if (threadIdx.x == 0) *first_s = first;
  __syncthreads();
}

// Position p's input row into row n of its tile: each item a 16-byte piece
// (one k16 step's K half: 8 halves from four K pairs 16 apart), every
// item's loads issued before any store.
__device__ void StoreRow(const GatherArgs& g, int p, int tile, int n) {
  constexpr int kMaxItems = 4;  // hidden <= 8 K pieces x kThreads
  const int k = g.hidden;
  const __half* __restrict__ src =
      g.x16 + static_cast<int64_t>(__ldg(g.tok_list + p)) * k;
  __half* __restrict__ dst = g.xb +
                             static_cast<int64_t>(tile) * kTileTokens * k +
                             static_cast<int64_t>(n / 8) * 8 * k + (n % 8) * 8;
  uint4 v[kMaxItems];
#pragma unroll
  for (int u = 0; u < kMaxItems; ++u) {
    const int pc = threadIdx.x + u * kThreads, j = pc / 2;
    if (pc >= k / 8) break;
    const int i0 = (j / 4) * 64 + (j % 4) * 4 + 2 * (pc % 2);
    v[u].x = __ldg(reinterpret_cast<const uint32_t*>(src + i0));
    v[u].y = __ldg(reinterpret_cast<const uint32_t*>(src + i0 + 16));
    v[u].z = __ldg(reinterpret_cast<const uint32_t*>(src + i0 + 32));
    v[u].w = __ldg(reinterpret_cast<const uint32_t*>(src + i0 + 48));
  }
#pragma unroll
  for (int u = 0; u < kMaxItems; ++u) {
    const int pc = threadIdx.x + u * kThreads;
    if (pc >= k / 8) break;
    *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(pc) * 64) = v[u];
  }
}

// One block a position; block 0 also writes the tables.
__global__ void __launch_bounds__(kThreads)
    GatherTilesKernel(const __grid_constant__ GatherArgs g) {
  __shared__ union {
    Scan::TempStorage scan;
    Reduce::TempStorage reduce;
  } storage;
  __shared__ int slot_s, first_s;
  const int slots = g.meta[kMetaSlots];
  if (blockIdx.x == 0) WriteTileFirst(g, slots, storage.scan);
  const int p = blockIdx.x;
  if (p >= g.meta[kMetaPositions]) return;
  PlacePosition(g, slots, p, storage.reduce, &slot_s, &first_s);
  const int in_slot = p - g.slot_tok_off[slot_s];
  StoreRow(g, p, first_s + in_slot / kTileTokens, in_slot % kTileTokens);
}

}  // namespace

GpuStatus LaunchGatherTiles(const LayerArgs& args, const TileTables& tables,
                            __half* xb, cudaStream_t stream) {
  if (args.geo.max_positions == 0) return OkStatus();
  const GatherArgs g{args.buf.x16,
                     xb,
                     args.buf.meta,
                     args.buf.slot_tok_off,
                     args.buf.slot_ntok,
                     args.buf.tok_list,
                     tables,
                     args.geo.hidden};
  if (args.geo.max_slots > kThreads * kSlotsPerThread ||
      args.geo.hidden > 8 * 4 * kThreads) {
    return Fail(RunStatus::kCannotImplement,
                "token tiles: at most 512 slots and hidden 8192");
  }
  GatherTilesKernel<<<args.geo.max_positions, kThreads, 0, stream>>>(g);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace moetune::gpu
