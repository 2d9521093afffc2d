#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/gemv_nvfp4_few.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"

namespace moetune::gpu {
namespace {

constexpr int kWarps = 8;
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

// The products of a lane's four weights of one 16-weight block with x:
// `code_pair` holds their two code bytes (the lower the lower K).
__device__ __forceinline__ float QuadDot(uint32_t code_pair, float4 x) {
  const float2 lo = E2m1PairTimes2ToMinus14(code_pair & 0xffu);
  const float2 hi = E2m1PairTimes2ToMinus14(code_pair >> 8);
  return lo.x * x.x + lo.y * x.y + hi.x * x.z + hi.y * x.w;
}

// Where a lane of GemvNvfp4FewKernel loads its code words and scale bytes:
// a round of U chunks c0 + ks * u (clamped to the last chunk), each loaded
// where its K is below k.
struct ChunkLoader {
  const uint32_t* codes;
  const uint8_t* scales;
  int chunks, ks;
  bool scale_lane;
  int codes_left, scales_left;

  template <int U>
  __device__ __forceinline__ void Load(int c0, uint32_t (&word)[U],
                                       uint32_t (&scale)[U]) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = min(c0 + ks * u, chunks - 1);
      word[u] = 256 * c < codes_left ? __ldg(codes + 32 * c) : 0u;
      scale[u] =
          scale_lane && 256 * c < scales_left ? __ldg(scales + 16 * c) : 0u;
    }
  }
};

// Block = kWarps / ks rows x ks parts of K; warp (row, part) takes every
// ks-th chunk of 256 K (128 code bytes, 16 scales) of its row, U chunks in
// flight; the parts meet in shared memory. Lane i loads a chunk's code word
// i and scale byte i (i < 16) but multiplies K 4i..4i+3 and 128+4i..+3,
// taking their codes and scales from lanes i/2, 16 + i/2, i/4 and 8 + i/4
// by shuffles, so that a warp's float4 loads of x are lane-contiguous (4
// L1 wavefronts each). With a 32-K unit a lane instead, each of a lane's
// eight float4 loads of x would touch a line per lane: 256 wavefronts a
// 4 KB of x, the bound at 7 % of DRAM (ncu: the dense gate_up at TP8
// 30.1 us; this way 19.3).
template <int NB, int U>
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
  // This lane's code word and scale byte of chunk 0; chunk c is 32 words
  // and 16 bytes on. Past k (a last, partial chunk) a lane loads nothing.
  const uint32_t* codes =
      reinterpret_cast<const uint32_t*>(g.codes) + w_row * (g.k / 8) + lane;
  const uint8_t* scales = g.scales + w_row * (g.k / 16) + (lane & 15);
  const float4* x_row =
      reinterpret_cast<const float4*>(g.x + group * g.x_group_stride);
  const int chunks = (g.k + 255) / 256, stride = ks * U;
  // Lane i's code word of chunk c holds K 256 c + 8 i on, its scale byte
  // (i < 16) K 256 c + 16 i on: each is loaded where that K is below k. (A
  // scale past k, read as the next row's or past the array, could be an
  // E4M3 NaN, which times a zero product is still NaN.)
  const int codes_left = g.k - 8 * lane, scales_left = g.k - 16 * (lane & 15);
  const ChunkLoader loader{codes,     scales,     chunks,     ks,
                           lane < 16, codes_left, scales_left};
  // The first round of weights before the wait (no kernel writes them):
  // with every projection NVFP4, the step at batch 2 -2.3 %.
  uint32_t word[U], scale[U];
  if (live) loader.Load<U>(part, word, scale);
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += NB) {
    const int nb = min(NB, g.batch - b0);
    float acc[NB] = {};
    for (int c0 = part; live && c0 < chunks; c0 += stride) {
      if (b0 > 0 || c0 != part) loader.Load<U>(c0, word, scale);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + ks * u, k0 = 256 * c;
        if (c >= chunks) break;  // the same for the whole warp
        const int half = 16 * (lane & 1);
        const uint32_t code_a =
            __shfl_sync(~0u, word[u], lane >> 1) >> half & 0xffffu;
        const uint32_t code_b =
            __shfl_sync(~0u, word[u], 16 + (lane >> 1)) >> half & 0xffffu;
        const uint32_t sa = __shfl_sync(~0u, scale[u], lane >> 2);
        const uint32_t sb = __shfl_sync(~0u, scale[u], 8 + (lane >> 2));
        const float2 s = E4m3PairToFloat(static_cast<uint16_t>(sa | sb << 8));
        const bool in_a = k0 + 4 * lane < g.k, in_b = k0 + 128 + 4 * lane < g.k;
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          if (i >= nb) continue;
          const float4* x = x_row + (b0 + i) * (g.x_stride / 4) + k0 / 4;
          const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          const float4 xa = in_a ? x[lane] : zero;
          const float4 xb = in_b ? x[32 + lane] : zero;
          acc[i] += QuadDot(code_a, xa) * s.x + QuadDot(code_b, xb) * s.y;
        }
      }
    }
    gemv_detail::SumPartsAndStore<NB, kWarps>(
        acc, nb, ks, g.rows, partial, [&](int r, int i, float sum) {
          g.y[(b0 + i) * g.y_stride + r] = sum * (g.tensor_scale * kPairScale);
        });
  }
}

// K parts a row (a row's 16-byte loads: 32 K of codes each), and blocks,
// as the BF16 GEMV's.
int PartsOf(const Nvfp4Gemv& g) {
  return gemv_detail::RowKParts(g.rows, g.k / 32, kWarps);
}

int BlocksOf(const Nvfp4Gemv& g, int ks) {
  return gemv_detail::RowBlocks(g.rows, ks, kWarps);
}

template <int NB>
GpuStatus Launch(const Nvfp4Gemv& g, cudaStream_t stream,
                 const LaunchPolicy& policy) {
  const int ks = PartsOf(g);
  // Chunks in flight a warp: 2 for one sequence a pass (4 spill 32 bytes
  // at its 40 registers and are no faster), 4 for two (batch 2 with every
  // projection NVFP4: 11.98 ms against 12.29 at 2).
  constexpr int kChunksInFlight = NB == 1 ? 2 : 4;
  return LaunchOverlapped(GemvNvfp4FewKernel<NB, kChunksInFlight>,
                          BlocksOf(g, ks), 32 * kWarps, 0, stream, policy, g,
                          ks);
}

}  // namespace

GpuStatus LaunchGemvNvfp4Few(const Nvfp4Gemv& g, cudaStream_t stream,
                             const LaunchPolicy& policy) {
  // Two sequences a pass fit five blocks an SM, one six. Where the grid is
  // more than five blocks an SM (rows many, K short: the dense MLP's down
  // at TP8 makes 768 blocks, 1.16 waves, and its step is 45 us slower than
  // with the general kernel), one sequence a pass keeps the grid in one wave,
  // and a warp reads its row again for the second from L1.
  if (g.batch == 2 &&
      BlocksOf(g, PartsOf(g)) <= kBlocksPerSmOfTwo * CurrentDeviceSmCount()) {
    return Launch<2>(g, stream, policy);
  }
  return Launch<1>(g, stream, policy);
}

}  // namespace moetune::gpu
