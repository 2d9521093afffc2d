// Where a Bf16Gemv's row r reads its weights and input, and where output
// (r, sequence b) goes: shared by the CUDA-core GEMV (gemv.cu) and the
// tensor-core one (gemv_mma.cu). Device-only; included by those two files.
#pragma once

#include <cstdint>

#include "kernels/cuda/step/gemv.cuh"

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

// Where output row r of sequence b goes (Bf16Gemv's segments).
__device__ __forceinline__ float* OutputOf(const Bf16Gemv& g, int r, int b) {
  if (g.segments == 0) return g.y + b * g.y_stride + r;
  int s = 0, begin = 0;
  while (s + 1 < g.segments && r >= g.seg_end[s]) begin = g.seg_end[s++];
  return g.seg_y[s] + b * g.seg_y_stride[s] + (r - begin);
}

}  // namespace moetune::gpu::gemv_detail
