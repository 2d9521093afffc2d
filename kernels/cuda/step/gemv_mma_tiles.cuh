// How the tensor-core GEMVs (gemv_mma.cu for BF16 weights, gemv_nvfp4_mma.cu
// for NVFP4) share out their work: a warp owns a tile of 16 weight rows
// (mma's M) and one of ks parts of the rows' K chunks; a block's 8 warps are
// 8 / ks tiles x ks parts, whose partial sums meet in shared memory and are
// written once an output. The same for both formats, so that the two differ
// only in how a chunk of weights becomes mma fragments.
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch.cuh"

namespace moetune::gpu::gemv_mma {

inline constexpr int kWarps = 8;
inline constexpr int kTileRows = 16;       // rows a warp (mma's M)
inline constexpr int kTargetWarps = 2048;  // enough to fill the GPU

inline int Tiles(int rows) { return (rows + kTileRows - 1) / kTileRows; }

// K parts a tile: doubled while the grid has fewer than kTargetWarps warps
// and each part keeps at least 2 * unroll chunks (the loads a warp keeps in
// flight).
inline int KParts(int tiles, int chunks, int unroll) {
  int ks = 1;
  while (ks < kWarps && tiles * ks < kTargetWarps &&
         chunks >= unroll * ks * 2) {
    ks *= 2;
  }
  return ks;
}

inline int Blocks(int tiles, int ks) {
  const int tiles_per_block = kWarps / ks;
  return (tiles + tiles_per_block - 1) / tiles_per_block;
}

// n-tiles of 8 sequences a pass: 1 up to 8 sequences, 2 up to 16, else 4.
inline int NTiles(int batch) { return batch <= 8 ? 1 : batch <= 16 ? 2 : 4; }

// Whether a GEMV (Bf16Gemv or Nvfp4Gemv: the same row groups and input
// strides) suits a tensor-core kernel: K whole chunks, every tile of
// tile_rows inside one input group, the inputs 16-byte aligned. Shared by
// these kernels and the wgmma one (gemv_wgmma.cu, 64-row tiles).
template <class Gemv>
bool Fits(const Gemv& g, int chunk_k, int tile_rows = kTileRows) {
  const bool one_group = g.rows_per_x == 0 || g.rows_per_x >= g.rows;
  const auto aligned = [](int64_t floats) { return floats % 4 == 0; };
  return g.k % chunk_k == 0 && (one_group || g.rows_per_x % tile_rows == 0) &&
         reinterpret_cast<uintptr_t>(g.x) % 16 == 0 && aligned(g.x_stride) &&
         aligned(g.x_group_stride);
}

template <int NT>
using Partials = float[kWarps][kTileRows][8 * NT];

// Lane (g, c)'s accumulators (mma's C layout: rows g and g + 8, columns 2c
// and 2c + 1 of each n-tile) into the warp's slot of the block's partials.
template <int NT>
__device__ __forceinline__ void KeepPartials(const float (&acc)[NT][4],
                                             Partials<NT>& partial, int warp,
                                             int lane) {
  const int gq = lane >> 2, c = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      partial[warp][gq + (e >= 2 ? 8 : 0)][nt * 8 + 2 * c + (e & 1)] =
          acc[nt][e];
    }
  }
}

// The block's tiles' outputs for sequences b0.., each written once (the ks
// parts summed) by out(row, sequence, sum), consecutive threads writing
// consecutive rows.
template <int NT, class Out>
__device__ void StoreTiles(int rows, int batch, const Partials<NT>& partial,
                           int tiles_per_block, int ks, int b0, Out out) {
  constexpr int kPerTile = kTileRows * 8 * NT;
  for (int i = threadIdx.x; i < tiles_per_block * kPerTile; i += blockDim.x) {
    const int tib = i / kPerTile, rem = i % kPerTile;
    const int col = rem / kTileRows, rr = rem % kTileRows;
    const int r = (blockIdx.x * tiles_per_block + tib) * kTileRows + rr;
    if (r >= rows || b0 + col >= batch) continue;
    float sum = 0.0f;
    for (int p = 0; p < ks; ++p) sum += partial[tib * ks + p][rr][col];
    out(r, b0 + col, sum);
  }
}

// Launches the kernel of the batch's n-tiles (kernel_of(nt) for an
// std::integral_constant nt: a __global__ void(Gemv, int ks)) over the rows'
// tiles, ks K parts a tile, each part at least 2 * unroll chunks of chunk_k.
template <class Gemv, class KernelOf>
GpuStatus LaunchTiles(const Gemv& g, int chunk_k, int unroll,
                      KernelOf kernel_of, cudaStream_t stream,
                      const LaunchPolicy& policy) {
  const int tiles = Tiles(g.rows);
  const int ks = KParts(tiles, g.k / chunk_k, unroll);
  const auto launch = [&](auto kernel) {
    return LaunchOverlapped(kernel, Blocks(tiles, ks), 32 * kWarps, 0, stream,
                            policy, g, ks);
  };
  switch (NTiles(g.batch)) {
    case 1:
      return launch(kernel_of(std::integral_constant<int, 1>{}));
    case 2:
      return launch(kernel_of(std::integral_constant<int, 2>{}));
    default:
      return launch(kernel_of(std::integral_constant<int, 4>{}));
  }
}

}  // namespace moetune::gpu::gemv_mma
