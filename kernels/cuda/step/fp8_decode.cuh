// FP8 E4M3 values to floats on the device, with the hardware's conversion
// (E4M3 -> FP16 is exact, as is FP16 -> float): the indexer's keys and the
// FP8 latent cache. Device code only; thread-safe.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace moetune::gpu {

// Four FP8 E4M3 values (a little-endian word) to floats.
__device__ __forceinline__ void DecodeE4M3x4(uint32_t word, float* out) {
  const __half2 lo(__nv_cvt_fp8x2_to_halfraw2(
      static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3));
  const __half2 hi(__nv_cvt_fp8x2_to_halfraw2(
      static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3));
  const float2 a = __half22float2(lo), b = __half22float2(hi);
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
}

}  // namespace moetune::gpu
