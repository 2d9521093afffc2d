#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/gemv_nvfp4_few.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 2;          // 32-K units in flight a lane
constexpr int kTargetWarps = 4096;  // as the BF16 GEMV's
// E2M1 pairs are decoded as E2M1 * 2^-14 (below); outputs scale back.
constexpr float kPairScale = 16384.0f;
// Blocks an SM by sequences a pass (the kernel's launch bounds; ptxas: 40
// and 48 registers).
constexpr int kBlocksPerSmOfOne = 6, kBlocksPerSmOfTwo = 5;

// Two E2M1 codes (a code byte, the lower nibble the lower K) as an FP16
// pair equal to E2M1 * 2^-14, by integer arithmetic instead of a table: a
// code's exponent and mantissa bits (e1 e0 m) become the half's two lowest
// exponent bits and top mantissa bit, which maps E2M1's subnormal (e = 0)
// onto FP16's, and its sign bit the half's. Each multiply places the
// byte's two nibbles at once, 12 bits apart, without carries.
__device__ __forceinline__ float2 E2m1PairTimes2ToMinus14(uint32_t byte) {
  const uint32_t magnitude = (byte * 0x00200200u) & 0x0E000E00u;
  const uint32_t sign = (byte * 0x01001000u) & 0x80008000u;
  const uint32_t bits = magnitude | sign;
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

// Two E4M3 block scales (the lower byte the lower K) as floats, by the
// hardware's exact E4M3 -> FP16 conversion.
__device__ __forceinline__ float2 E4m3PairToFloat(uint16_t bytes) {
  uint32_t half2_bits;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(half2_bits) : "h"(bytes));
  return __half22float2(*reinterpret_cast<const __half2*>(&half2_bits));
}

// sum over one 16-weight block (two code words) of E2M1 * 2^-14 * x, x
// 16-byte aligned.
__device__ __forceinline__ float BlockDot(uint32_t w0, uint32_t w1,
                                          const float* x) {
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float sum = 0.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t word = h == 0 ? w0 : w1;
    const float4 a = x4[2 * h], b = x4[2 * h + 1];
    const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 w =
          E2m1PairTimes2ToMinus14(__byte_perm(word, 0, 0x4440 + j));
      sum += w.x * xs[2 * j] + w.y * xs[2 * j + 1];
    }
  }
  return sum;
}

// Block = kWarps / ks rows x ks parts of K; warp (row, part) takes every
// ks-th group of 32 units (32 K: 16 code bytes and two scales) of its row,
// kUnroll units in flight a lane; the parts meet in shared memory.
template <int NB>
__global__ void __launch_bounds__(32 * kWarps, NB == 1 ? kBlocksPerSmOfOne
                                                       : kBlocksPerSmOfTwo)
    GemvNvfp4FewKernel(Nvfp4Gemv g, int ks) {
  __shared__ float partial[kWarps][NB];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows_per_block = kWarps / ks;
  const int r = blockIdx.x * rows_per_block + warp / ks, part = warp % ks;
  const bool live = r < g.rows;
  const int rr = live ? r : 0;
  const int group = rr / g.rows_per_x, within = rr % g.rows_per_x;
  const int64_t w_row = group * g.w_group_stride + g.w_group_offset + within;
  const uint4* codes =
      reinterpret_cast<const uint4*>(g.codes) + w_row * (g.k / 32);
  const uint16_t* scales =
      reinterpret_cast<const uint16_t*>(g.scales) + w_row * (g.k / 32);
  const float* x_row = g.x + group * g.x_group_stride;
  const int units = g.k / 32, stride = 32 * ks;
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += NB) {
    const int nb = min(NB, g.batch - b0);
    float acc[NB] = {};
    for (int u0 = part * 32 + lane; live && u0 < units;
         u0 += stride * kUnroll) {
      uint4 c[kUnroll];
      uint16_t s[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int unit = min(u0 + stride * u, units - 1);
        c[u] = __ldg(codes + unit);
        s[u] = __ldg(scales + unit);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int unit = u0 + stride * u;
        if (unit >= units) continue;
        const float2 scale = E4m3PairToFloat(s[u]);
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          if (i >= nb) continue;
          const float* x = x_row + (b0 + i) * g.x_stride + unit * 32;
          acc[i] += BlockDot(c[u].x, c[u].y, x) * scale.x +
                    BlockDot(c[u].z, c[u].w, x + 16) * scale.y;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const float sum = WarpSum(acc[i]);
      if (lane == 0) partial[warp][i] = sum;
    }
    __syncthreads();
    const int t = threadIdx.x, row_in_block = t / NB, i = t % NB;
    const int out_row = blockIdx.x * rows_per_block + row_in_block;
    if (row_in_block < rows_per_block && i < nb && out_row < g.rows) {
      float sum = 0.0f;
      for (int k = 0; k < ks; ++k) sum += partial[row_in_block * ks + k][i];
      g.y[(b0 + i) * g.y_stride + out_row] =
          sum * (g.tensor_scale * kPairScale);
    }
    __syncthreads();
  }
}

// Blocks of kWarps / ks rows for g, ks K parts a row.
int PartsOf(const Nvfp4Gemv& g) {
  int ks = 1;
  while (ks < kWarps && int64_t{g.rows} * ks < kTargetWarps &&
         g.k / 32 >= 64 * ks) {
    ks *= 2;
  }
  return ks;
}

int BlocksOf(const Nvfp4Gemv& g, int ks) {
  const int rows_per_block = kWarps / ks;
  return (g.rows + rows_per_block - 1) / rows_per_block;
}

template <int NB>
GpuStatus Launch(const Nvfp4Gemv& g, cudaStream_t stream) {
  const int ks = PartsOf(g);
  return LaunchOverlapped(GemvNvfp4FewKernel<NB>, BlocksOf(g, ks), 32 * kWarps,
                          0, stream, g, ks);
}

}  // namespace

GpuStatus LaunchGemvNvfp4Few(const Nvfp4Gemv& g, cudaStream_t stream) {
  // Two sequences a pass fit five blocks an SM, one six. Where the grid is
  // more than five blocks an SM (rows many, K short: the dense MLP's down
  // at TP8 made 768 blocks, 1.16 waves, and its step was 45 us slower than
  // with the general kernel; device run 122), one sequence a pass keeps the
  // grid in one wave, and a warp reads its row again for the second from L1.
  if (g.batch == 2 &&
      BlocksOf(g, PartsOf(g)) <= kBlocksPerSmOfTwo * CurrentDeviceSmCount()) {
    return Launch<2>(g, stream);
  }
  return Launch<1>(g, stream);
}

}  // namespace moetune::gpu
