// BF16 tensor-core products with float accuracy, for the step's kernels
// (gemv_mma.cu, mla_mma.cu): mma.sync m16n8k16 with float accumulation, and
// a float pair split into three BF16 pairs whose products add up to the
// float's to 2^-27 (BF16 weights and cache entries are exact as they are;
// the float side is what needs the parts). Device-only.
#pragma once

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
// before rounded off. Two parts leave 2^-18, which device run 56 measured
// as up to 2.5e-6 of a GEMV row's products' magnitude: 30x a float sum's
// error.
__device__ __forceinline__ void SplitBf16(float x0, float x1, uint32_t* hi,
                                          uint32_t* mid, uint32_t* lo) {
  float r0, r1;
  *hi = PackBf16(x0, x1, &r0, &r1);
  *mid = PackBf16(r0, r1, &r0, &r1);
  *lo = PackBf16(r0, r1, &r0, &r1);
}

}  // namespace moetune::gpu
