// Warp and block reductions of the decode step's kernels (float sums and
// maxima). Device-only helpers; blocks of at most 1024 threads, a multiple
// of 32.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace moetune::gpu {

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The block's sum, returned to every thread. `scratch` holds 32 floats;
// every thread must call it.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(v);
}

// BF16 bits <-> float.
__device__ __forceinline__ float Bf16ToFloat(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
__device__ __forceinline__ uint16_t FloatToBf16(float f) {
  uint32_t bits = __float_as_uint(f);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // nearest even (finite values)
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace moetune::gpu
