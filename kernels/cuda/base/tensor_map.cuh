// TMA tensor maps (Hopper's tensor copies) of row-major matrices in groups
// of rows: BF16 weights read in boxes of 64 K x the block's rows in the
// 128-byte swizzle wgmma's K-major operands read, and float inputs read in
// boxes of 64 K x the batch's sequences (kernels/cuda/step/gemv_wgmma.cu).
// The driver's encoder is resolved through the runtime once (no link to
// libcuda). Host-only; included by .cu files only (cuda.h's CUtensorMap is
// a kernel parameter there).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"

namespace moetune::gpu {

// Row r of group g at base + g * group_stride + r * row_stride elements,
// r < rows_per_group, each row k elements (row_stride, group_stride and the
// base 16-byte multiples; groups may interleave, as per-head inputs do): a
// 3-D map (K, row, group), so a box never reads past its group's rows (those
// read as zeros).
struct RowsMap {
  const void* base = nullptr;
  bool bf16 = true;  // else float
  int64_t k = 0, row_stride = 0;
  int64_t rows_per_group = 0, groups = 1, group_stride = 0;
  int box_k = 64, box_rows = 64;  // each at most 256
  bool swizzle_128 = false;       // box_k's bytes then exactly 128
};

// Encodes `m` into *map (zeros out of bounds).
GpuStatus EncodeRowsMap(const RowsMap& m, CUtensorMap* map);

}  // namespace moetune::gpu
