// Activations as fused_gemv_fp8's FP8 mma reads them: each block of 16
// consecutive values of a row (a token's input, or a position's h) is scaled
// by a power of two that puts its largest magnitude in [128, 256), then split
// into hi = E4M3(v) and lo = E4M3(v - hi): hi + lo keeps ~8 significant bits
// (BF16's precision), where E4M3 alone keeps 4. The inverse scale is kept
// per block and multiplied into the accumulator with the weight block scale.
// Buffer layout: bytes [row][block][hi 16 | lo 16], floats [row][block].
// Device functions only; thread-safe.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace moetune::gpu::act_fp8 {

inline constexpr int kBlock = 16;
inline constexpr int kBlockBytes = 32;  // hi and lo

// The power of two for a block whose largest magnitude is `amax`, and its
// inverse: amax * scale in [128, 256) (E4M3 reaches 448), clamped so that
// both stay normal floats (a zero block gets 2^126: its values stay 0).
__device__ __forceinline__ float BlockScale(float amax, float* inv) {
  const int e = (__float_as_int(amax) >> 23) & 0xff;
  const int kb = min(max(261 - e, 1), 253);  // biased exponent of the scale
  *inv = __int_as_float((254 - kb) << 23);
  return __int_as_float(kb << 23);
}

// Two floats to two E4M3 bytes (round to nearest even, saturating): a in
// the low byte.
__device__ __forceinline__ uint32_t ToE4m3x2(float a, float b) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(b), "f"(a));
  return r;
}

// Two E4M3 bytes (low byte first) back to floats.
__device__ __forceinline__ float2 FromE4m3x2(uint32_t bytes) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n"
      : "=r"(h2)
      : "h"(static_cast<uint16_t>(bytes)));
  const __half2 h = *reinterpret_cast<const __half2*>(&h2);
  return __half22float2(h);
}

// hi and lo bytes of two scaled values (low byte = a).
__device__ __forceinline__ void Split2(float a, float b, uint32_t* hi,
                                       uint32_t* lo) {
  *hi = ToE4m3x2(a, b);
  const float2 back = FromE4m3x2(*hi);
  *lo = ToE4m3x2(a - back.x, b - back.y);
}

// One block of 16 values -> its hi and lo bytes and inverse scale.
__device__ __forceinline__ void SplitBlock(const float (&v)[kBlock], uint4* hi,
                                           uint4* lo, float* inv) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kBlock; ++i) amax = fmaxf(amax, fabsf(v[i]));
  const float s = BlockScale(amax, inv);
  uint32_t h[8], l[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) Split2(v[2 * i] * s, v[2 * i + 1] * s, &h[i], &l[i]);
  *hi = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                   h[6] | h[7] << 16);
  *lo = make_uint4(l[0] | l[1] << 16, l[2] | l[3] << 16, l[4] | l[5] << 16,
                   l[6] | l[7] << 16);
}

// Block `block` of BF16 row data (16 values at `src`) -> `dst` (32 bytes,
// 16-byte aligned) and `inv`.
__device__ __forceinline__ void SplitBf16Block(const uint16_t* src,
                                               uint8_t* dst, float* inv) {
  const uint4 a = *reinterpret_cast<const uint4*>(src);
  const uint4 b = *reinterpret_cast<const uint4*>(src + 8);
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  float v[kBlock];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
  uint4 hi, lo;
  SplitBlock(v, &hi, &lo, inv);
  reinterpret_cast<uint4*>(dst)[0] = hi;
  reinterpret_cast<uint4*>(dst)[1] = lo;
}

}  // namespace moetune::gpu::act_fp8
