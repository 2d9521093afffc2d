// Tensor-core products with float accuracy, for the step's kernels
// (gemv_mma.cu, index_scores_mma.cu, mla_mma.cu): mma.sync m16n8k16 on BF16
// or FP16 with float accumulation, and a float pair split into BF16 or FP16
// parts whose products add up to the float's (three BF16 parts: 2^-27; two
// FP16 parts: ~2^-22). The other side (BF16 weights and cache entries, FP8
// keys as FP16) is exact as it is. Device-only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace moetune::gpu {

__device__ __forceinline__ void MmaBf16(float (&d)[4], uint32_t a0, uint32_t a1,
                                        uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void MmaF16(float (&d)[4], uint32_t a0, uint32_t a1,
                                       uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// (x0, x1), x0 in the lower half, rounded to a BF16 pair; *r0, *r1 what the
// rounding left (exact in float).
__device__ __forceinline__ uint32_t PackBf16(float x0, float x1, float* r0,
                                             float* r1) {
  uint32_t p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(p) : "f"(x1), "f"(x0));
  *r0 = x0 - __uint_as_float(p << 16);
  *r1 = x1 - __uint_as_float(p & 0xffff0000u);
  return p;
}

// (x0, x1) = hi + mid + lo to 2^-27: each part takes the bits the one
// before rounded off. Two parts leave 2^-18, which measures as up to 2.5e-6
// of a GEMV row's products' magnitude: 30x a float sum's error.
__device__ __forceinline__ void SplitBf16(float x0, float x1, uint32_t* hi,
                                          uint32_t* mid, uint32_t* lo) {
  float r0, r1;
  *hi = PackBf16(x0, x1, &r0, &r1);
  *mid = PackBf16(r0, r1, &r0, &r1);
  *lo = PackBf16(r0, r1, &r0, &r1);
}

// (x0, x1), x0 in the lower half, as FP16 pairs hi and lo, x = hi + lo to
// ~2^-22 (FP16's range: for inputs well inside it, as the indexer's queries).
__device__ __forceinline__ void SplitHalf(float x0, float x1, uint32_t* hi,
                                          uint32_t* lo) {
  uint32_t h, l;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(x1), "f"(x0));
  const float2 hf = __half22float2(*reinterpret_cast<const __half2*>(&h));
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n"
      : "=r"(l)
      : "f"(x1 - hf.y), "f"(x0 - hf.x));
  *hi = h;
  *lo = l;
}

}  // namespace moetune::gpu
