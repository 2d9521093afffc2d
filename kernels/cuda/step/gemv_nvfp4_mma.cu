#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/gemv_mma_tiles.cuh"
#include "kernels/cuda/step/gemv_nvfp4_mma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

using gemv_mma::kTileRows;
using gemv_mma::kWarps;
constexpr int kChunkK = 128;  // K a warp takes at a time: 32 a lane

// Weight row r's codes and scales, and the input its group reads.
struct Nvfp4Row {
  const uint8_t* codes;
  const uint8_t* scales;
  const float* x;
};
__device__ __forceinline__ Nvfp4Row RowOf(const Nvfp4Gemv& g, int r) {
  const int group = r / g.rows_per_x, within = r % g.rows_per_x;
  const int64_t w_row = group * g.w_group_stride + g.w_group_offset + within;
  return {g.codes + w_row * (g.k / 2), g.scales + w_row * (g.k / 16),
          g.x + group * g.x_group_stride};
}

// A code byte (two E2M1 weights, the lower nibble the lower K) as a BF16
// pair, from a table of all 256 in shared memory.
__device__ void FillPairTable(uint32_t* table) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    const float lo = nvfp4::E2M1ToFloat(i & 0xfu);
    const float hi = nvfp4::E2M1ToFloat(i >> 4);
    float r0, r1;
    table[i] = PackBf16(lo, hi, &r0, &r1);  // exact: r0 = r1 = 0
  }
}

// An E4M3 scale byte as a BF16 pair (s, s) (exact).
__device__ __forceinline__ __nv_bfloat162 ScaleBf16(uint32_t byte) {
  const float s = nvfp4::E4M3ToFloat(byte);
  return __floats2bfloat162_rn(s, s);
}

// Weights 4i..4i+3 of a lane's 32 (code bytes 2i, 2i+1 of its 16), scaled:
// the mma A pair registers (K 4i, 4i+1) and (4i+2, 4i+3).
__device__ __forceinline__ void DecodeFour(const uint4& codes, int i,
                                           __nv_bfloat162 scale,
                                           const uint32_t* table,
                                           uint32_t* pair01, uint32_t* pair23) {
  const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  const uint32_t word = words[i / 2];
  const int shift = (i % 2) * 16;
  const uint32_t b0 = (word >> shift) & 0xffu,
                 b1 = (word >> (shift + 8)) & 0xffu;
  __nv_bfloat162 w01, w23;
  *reinterpret_cast<uint32_t*>(&w01) = table[b0];
  *reinterpret_cast<uint32_t*>(&w23) = table[b1];
  w01 = __hmul2(w01, scale);
  w23 = __hmul2(w23, scale);
  *pair01 = *reinterpret_cast<uint32_t*>(&w01);
  *pair23 = *reinterpret_cast<uint32_t*>(&w23);
}

// One 128-K chunk: lane (g, c) holds rows g and g + 8's weights at K
// 32c..32c+31 of the chunk (16 code bytes, 2 scales each); mma i takes
// K 32c + 4i .. +3 of A and B alike (a permutation of the chunk's K the
// sum does not see), so B is sequence g's inputs at the same K. Each 32 K
// of products (two i's, six mma) go to a fresh accumulator added in float,
// as in gemv_mma.cu. The tensor cores align a 16-K group's products to the
// largest and truncate below it, and NVFP4's block scales spread a group's
// products far more than BF16 weights do: the worst error is 1.6e-7 of the
// products' magnitude on 6144-K rows and 3.8e-7 on 512-K ones (device run
// 64; the CUDA-core kernel's float sums 0.7e-7 and 1.2e-7). A fresh
// accumulator a 16 K measured the same (4.0e-7, run 65), one over 128 K
// 2.5e-7 on 6144-K rows (run 63).
template <int NT>
__device__ __forceinline__ void MmaChunk(const uint4& ca, const uint4& cb,
                                         uint16_t sa, uint16_t sb,
                                         const uint32_t* table,
                                         const float* const (&xb)[NT],
                                         int k_off, float (&acc)[NT][4]) {
  const __nv_bfloat162 scale_a[2] = {ScaleBf16(sa & 0xffu), ScaleBf16(sa >> 8)};
  const __nv_bfloat162 scale_b[2] = {ScaleBf16(sb & 0xffu), ScaleBf16(sb >> 8)};
#pragma unroll
  for (int i0 = 0; i0 < 8; i0 += 2) {
    float part[NT][4] = {};
#pragma unroll
    for (int i = i0; i < i0 + 2; ++i) {
      uint32_t a0, a1, a2, a3;
      DecodeFour(ca, i, scale_a[i / 4], table, &a0, &a2);
      DecodeFour(cb, i, scale_b[i / 4], table, &a1, &a3);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float4 v =
            __ldg(reinterpret_cast<const float4*>(xb[nt] + k_off + 4 * i));
        uint32_t h[2], m[2], l[2];
        SplitBf16(v.x, v.y, &h[0], &m[0], &l[0]);
        SplitBf16(v.z, v.w, &h[1], &m[1], &l[1]);
        MmaBf16(part[nt], a0, a1, a2, a3, l[0], l[1]);
        MmaBf16(part[nt], a0, a1, a2, a3, m[0], m[1]);
        MmaBf16(part[nt], a0, a1, a2, a3, h[0], h[1]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] += part[nt][e];
    }
  }
}

// Block = kWarps / ks tiles of 16 rows x ks parts of K; warp (tile, part)
// takes every ks-th 128-K chunk of its rows for 8 * NT sequences a pass.
template <int NT>
__global__ void __launch_bounds__(kWarps * 32, 2)
    GemvNvfp4MmaKernel(Nvfp4Gemv g, int ks) {
  __shared__ uint32_t table[256];
  __shared__ gemv_mma::Partials<NT> partial;
  FillPairTable(table);  // needs nothing from the kernels before
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gq = lane >> 2, c = lane & 3;
  const int tiles_per_block = kWarps / ks;
  const int r0 = (blockIdx.x * tiles_per_block + warp / ks) * kTileRows;
  const int part = warp % ks;
  const bool live = r0 < g.rows;
  const Nvfp4Row ra = RowOf(g, min(r0 + gq, g.rows - 1));
  const Nvfp4Row rb = RowOf(g, min(r0 + gq + 8, g.rows - 1));
  const int chunks = g.k / kChunkK;
  EnterAfterPriorKernels();
  __syncthreads();  // the table
  for (int b0 = 0; b0 < g.batch; b0 += 8 * NT) {
    float acc[NT][4] = {};
    const float* xb[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int b = min(b0 + nt * 8 + gq, g.batch - 1);
      xb[nt] = ra.x + b * g.x_stride + 32 * c;
    }
    for (int kc = part; live && kc < chunks; kc += ks) {
      const uint4 ca =
          __ldg(reinterpret_cast<const uint4*>(ra.codes) + kc * 4 + c);
      const uint4 cb =
          __ldg(reinterpret_cast<const uint4*>(rb.codes) + kc * 4 + c);
      const uint16_t sa =
          __ldg(reinterpret_cast<const uint16_t*>(ra.scales) + kc * 4 + c);
      const uint16_t sb =
          __ldg(reinterpret_cast<const uint16_t*>(rb.scales) + kc * 4 + c);
      MmaChunk<NT>(ca, cb, sa, sb, table, xb, kc * kChunkK, acc);
    }
    gemv_mma::KeepPartials<NT>(acc, partial, warp, lane);
    __syncthreads();
    gemv_mma::StoreTiles<NT>(g.rows, g.batch, partial, tiles_per_block, ks, b0,
                             [&](int r, int b, float sum) {
                               g.y[static_cast<int64_t>(b) * g.y_stride + r] =
                                   sum * g.tensor_scale;
                             });
    __syncthreads();
  }
}

}  // namespace

bool GemvNvfp4MmaFits(const Nvfp4Gemv& g) { return gemv_mma::Fits(g, kChunkK); }

GpuStatus LaunchGemvNvfp4Mma(const Nvfp4Gemv& g, cudaStream_t stream) {
  // A part keeps at least 8 chunks (2 x 4) of 128 K.
  return gemv_mma::LaunchTiles(
      g, kChunkK, 4,
      [](auto nt) { return &GemvNvfp4MmaKernel<decltype(nt)::value>; }, stream);
}

}  // namespace moetune::gpu
