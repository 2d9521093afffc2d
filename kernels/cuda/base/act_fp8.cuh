// Activations as fused_gemv_fp8's FP8 wgmma reads them: each block of 16
// consecutive values of a row (a token's input, or a position's h) is scaled
// by a power of two that puts its largest magnitude in [128, 256), then split
// into hi = E4M3(v) and lo = E4M3(v - hi): hi + lo keeps ~8 significant bits
// (BF16's precision), where E4M3 alone keeps 4. The inverse scale is kept
// per block and multiplied into the accumulator with the weight block scale.
//
// The bytes are stored as the wgmma's B operand (K-major, no swizzle), 512
// per 64-K chunk, zero where no value goes: k32 step m (0, 1) at 256 m; its
// two core matrices (K 0-15 and 16-31 of the step) at +0 and +128; in each,
// row n (16 bytes) is mma column n = half n % 2 (hi, lo) of block n / 2 of
// the chunk, nonzero only in bytes 4 (n / 2) .. + 3, which pair with lane
// c = n / 2's weights (tiled_e4m3.h): value 8m + 4 cm + b of the block at
// core matrix cm, byte 4 (n / 2) + b. The inverse scales: floats
// [row][block].
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace moetune::gpu::act_fp8 {

inline constexpr int kBlock = 16;
inline constexpr int kChunkBytes = 512;  // B bytes of 64 K (4 blocks)
inline constexpr int kBytesPerValue = kChunkBytes / 64;

// Byte offset, in a row's B bytes, of value `col` (0..15) of half `half` of
// block `block`.
__device__ __forceinline__ int BOffset(int block, int half, int col) {
  const int cb = block % 4;
  return (block / 4) * kChunkBytes + (col / 8) * 256 + ((col % 8) / 4) * 128 +
         (2 * cb + half) * 16 + 4 * cb + col % 4;
}

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
  for (int i = 0; i < 8; ++i)
    Split2(v[2 * i] * s, v[2 * i + 1] * s, &h[i], &l[i]);
  *hi = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                   h[6] | h[7] << 16);
  *lo = make_uint4(l[0] | l[1] << 16, l[2] | l[3] << 16, l[4] | l[5] << 16,
                   l[6] | l[7] << 16);
}

// Block `block` of a BF16 row (its 16 values at `src`) -> its B bytes in
// the row's B bytes `dst` and its inverse scale.
__device__ __forceinline__ void SplitBf16Block(const uint16_t* src, int block,
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
  const uint32_t words[2][4] = {{hi.x, hi.y, hi.z, hi.w},
                                {lo.x, lo.y, lo.z, lo.w}};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // values 4q .. 4q + 3
      *reinterpret_cast<uint32_t*>(dst + BOffset(block, half, 4 * q)) =
          words[half][q];
    }
  }
}

}  // namespace moetune::gpu::act_fp8
