// The decode step's matrix-vector products over the batch: BF16 weights
// and plain row-major NVFP4 weights (each projection group in the format
// the workload gives it: step_gpu.h StepFormats). BF16: a warp a weight row, or
// a part of one where the rows are too few to fill the GPU (the parts add up in
// shared memory); 16-byte loads, float accumulation; the batch in chunks of up
// to kGemvBatchChunk (a compile-time size, so a batch of one computes one
// product), each chunk re-reading the row (from L1 after the first).
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"

namespace moetune::gpu {

inline constexpr int kGemvBatchChunk = 8;

// y[b][r] = sum_c W[w_row(r)][c] * x_r[b][c] for r < rows, c < k, with
//   w_row(r) = (r / rows_per_x) * w_group_stride + w_group_offset
//              + r % rows_per_x
//   x_r[b]   = x + b * x_stride + (r / rows_per_x) * x_group_stride,
// so one launch serves a plain GEMV (rows_per_x = rows) and per-head
// products whose heads read their own input and every other block of W's
// rows (kv_b's value rows: W_UV). y rows are `y_stride` apart. k must be a
// multiple of 8, x and W rows 16-byte aligned.
struct Bf16Gemv {
  const uint16_t* w = nullptr;
  int rows = 0, k = 0;
  int rows_per_x = 0;  // 0 = rows
  int64_t w_group_stride = 0, w_group_offset = 0;
  const float* x = nullptr;
  int64_t x_stride = 0, x_group_stride = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  int batch = 1;
  // Several matrices of one input whose weights lie back to back, in one
  // launch (one ramp up and down instead of several): rows [end[s - 1],
  // end[s]) are segment s's, written to seg_y[s] from its row 0, rows
  // seg_y_stride[s] apart per sequence. 0 segments: y and y_stride.
  static constexpr int kMaxSegments = 4;
  int segments = 0;
  int seg_end[kMaxSegments] = {};
  float* seg_y[kMaxSegments] = {};
  int64_t seg_y_stride[kMaxSegments] = {};
};
// Appends a segment of `rows` rows written to y (rows y_stride apart).
void AddGemvSegment(Bf16Gemv* g, int rows, float* y, int64_t y_stride);
GpuStatus LaunchGemvBf16(const Bf16Gemv& g, cudaStream_t stream,
                         const LaunchPolicy& policy);

// y[b][r] = tensor_scale * sum_c E2M1(code) * E4M3(scale) * x_r[b][c]:
// codes [rows][k / 2] (low nibble = even column), block scales
// [rows][k / 16]; k a multiple of 32. Rows map to weight rows and inputs as
// Bf16Gemv's do (w_row(r), x_r), so per-head products (W_UV) run here too.
struct Nvfp4Gemv {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  float tensor_scale = 0;
  int rows = 0, k = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  int batch = 1;
  int rows_per_x = 0;  // 0 = rows
  int64_t w_group_stride = 0, w_group_offset = 0, x_group_stride = 0;
  // Scratch of Nvfp4GemvInputParts(batch, input groups x k) elements, or
  // null: from kNvfp4SplitOnceFromBatch the tensor-core kernel then reads
  // the inputs split into their BF16 parts once, by a pass before it
  // (gemv_nvfp4_mma.cuh), rather than splitting them in every warp.
  uint2* x_parts = nullptr;
};
GpuStatus LaunchGemvNvfp4(const Nvfp4Gemv& g, cudaStream_t stream,
                          const LaunchPolicy& policy);

// q_lat[b][h][j] = sum_i q[b][h][i] * kv_b[h * (nope + v) + i][j]: the query
// absorbed into the latent space (W_UK of this rank's heads), j < kv_lora.
// q rows are `q_head_stride` apart per head and `q_stride` per sequence.
// With NVFP4 weights (codes set): kv_b's codes [rows][kv_lora / 2], block
// scales [rows][kv_lora / 16] and tensor scale instead of kv_b.
struct AbsorbQuery {
  const uint16_t* kv_b = nullptr;  // this rank's heads' rows
  int heads = 0, nope = 0, v_dim = 0, kv_lora = 0;
  const float* q = nullptr;
  int64_t q_stride = 0, q_head_stride = 0;
  float* q_lat = nullptr;  // [batch][heads][kv_lora]
  int batch = 1;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  float tensor_scale = 0;
};
GpuStatus LaunchAbsorbQuery(const AbsorbQuery& a, cudaStream_t stream,
                            const LaunchPolicy& policy);

}  // namespace moetune::gpu
