// Where a Bf16Gemv's row r reads its weights and input, and where output
// (r, sequence b) goes, and the BF16 product of eight: shared by the
// CUDA-core GEMVs (gemv.cu, gemv_nvfp4_few.cu) and the tensor-core one
// (gemv_mma.cu); also how the CUDA-core GEMVs split rows and K into blocks
// (host). Included by those files only.
#pragma once

#include <cstdint>

#include "kernels/cuda/step/gemv.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu::gemv_detail {

// Weight row r of the GEMV and the input its group reads.
struct GemvRow {
  const uint4* w;
  const float* x;
};
__device__ __forceinline__ GemvRow RowOf(const Bf16Gemv& g, int r) {
  const int group = r / g.rows_per_x, within = r % g.rows_per_x;
  const int64_t w_row = group * g.w_group_stride + g.w_group_offset + within;
  return {reinterpret_cast<const uint4*>(g.w + w_row * g.k),
          g.x + group * g.x_group_stride};
}

// K parts a row of a CUDA-core GEMV (blocks of `warps` warps: warps / ks
// rows x ks parts): doubled while the GEMV has fewer than 4096 warps (too
// few loads in flight to fill the GPU) and each part keeps at least 64 of
// the row's `loads` 16-byte loads.
inline int RowKParts(int rows, int loads, int warps) {
  int ks = 1;
  while (ks < warps && int64_t{rows} * ks < 4096 && loads >= 64 * ks) {
    ks *= 2;
  }
  return ks;
}

// Blocks of warps / ks rows for `rows` rows.
inline int RowBlocks(int rows, int ks, int warps) {
  const int rows_per_block = warps / ks;
  return (rows + rows_per_block - 1) / rows_per_block;
}

// Eight BF16 weights (one 16-byte load) as floats.
__device__ __forceinline__ void Unpack8(const uint4& w, float* out) {
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// Four BF16 weights (one 8-byte load) as floats.
__device__ __forceinline__ void Unpack4(const uint2& w, float* out) {
  out[0] = __uint_as_float(w.x << 16);
  out[1] = __uint_as_float(w.x & 0xffff0000u);
  out[2] = __uint_as_float(w.y << 16);
  out[3] = __uint_as_float(w.y & 0xffff0000u);
}

// w[0..7] . x[0..7], x 16-byte aligned.
__device__ __forceinline__ float Dot8(const float* w, const float* x) {
  const float4 a = reinterpret_cast<const float4*>(x)[0];
  const float4 b = reinterpret_cast<const float4*>(x)[1];
  return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x +
         w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

// Where output row r of sequence b goes (Bf16Gemv's segments).
__device__ __forceinline__ float* OutputOf(const Bf16Gemv& g, int r, int b) {
  if (g.segments == 0) return g.y + b * g.y_stride + r;
  int s = 0, begin = 0;
  while (s + 1 < g.segments && r >= g.seg_end[s]) begin = g.seg_end[s++];
  return g.seg_y[s] + b * g.seg_y_stride[s] + (r - begin);
}

// The end of a CUDA-core GEMV pass over sequences b0.. of a block of
// kWarps / ks rows x ks K parts: each warp's sums (acc[i], i < nb) meet the
// other parts' in `partial` in a fixed order, and store(row, i, sum) writes
// each of the block's rows below `rows`. Every thread of the block calls it.
template <int NB, int kWarps, typename Store>
__device__ __forceinline__ void SumPartsAndStore(const float (&acc)[NB], int nb,
                                                 int ks, int rows,
                                                 float (*partial)[NB],
                                                 Store store) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    const float sum = WarpSum(acc[i]);
    if (lane == 0) partial[warp][i] = sum;
  }
  __syncthreads();
  const int rows_per_block = kWarps / ks;
  const int t = threadIdx.x, row_in_block = t / NB, i = t % NB;
  const int out_row = blockIdx.x * rows_per_block + row_in_block;
  if (row_in_block < rows_per_block && i < nb && out_row < rows) {
    float sum = 0.0f;
    for (int k = 0; k < ks; ++k) sum += partial[row_in_block * ks + k][i];
    store(out_row, i, sum);
  }
  __syncthreads();
}

}  // namespace moetune::gpu::gemv_detail
