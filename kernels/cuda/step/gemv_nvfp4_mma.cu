#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/gemv_mma_tiles.cuh"
#include "kernels/cuda/step/gemv_nvfp4_mma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

using gemv_mma::kTileRows;
using gemv_mma::kWarps;
constexpr int kChunkK = 128;  // K a warp takes at a time: 32 a lane
constexpr int kParts = 3;     // BF16 parts of an input float

// 8-sequence tiles that passes of nt n-tiles (8 sequences each) cover:
// the scratch's tiles, as SplitInputsKernel writes and the kernel of
// NTiles(batch) n-tiles reads them.
__host__ __device__ int SequenceTiles(int batch, int nt) {
  return nt * ((batch + 8 * nt - 1) / (8 * nt));
}

__host__ __device__ int InputGroups(const Nvfp4Gemv& g) {
  return (g.rows + g.rows_per_x - 1) / g.rows_per_x;
}

// Lane `lane`'s fragments of (input group, 8-sequence tile st, chunk kc,
// i) in the scratch: its kParts uint2 (hi, mid, lo) 32 apart, each the
// BF16 pairs of K 32c + 4i, +1 and +2, +3 of the chunk for sequence
// 8 st + lane / 4 -- what MmaChunk's lane reads for that tile.
__device__ __forceinline__ int64_t PartsIndex(int group, int tiles, int st,
                                              int chunks, int kc, int i,
                                              int lane) {
  return ((((int64_t{group} * tiles + st) * chunks + kc) * 8 + i) * kParts) *
             32 +
         lane;
}

// The pass before the kernel: every input float split into its three BF16
// parts once, a thread a (group, tile, chunk, i, lane); sequences past the
// batch repeat the last, as the kernel's own clamped loads do.
__global__ void __launch_bounds__(256)
    SplitInputsKernel(Nvfp4Gemv g, int tiles) {
  EnterAfterPriorKernels();
  const int chunks = g.k / kChunkK;
  const int64_t total = int64_t{InputGroups(g)} * tiles * chunks * 256;
  const int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= total) return;
  const int lane = t % 32, i = (t / 32) % 8;
  const int64_t rest = t / 256;
  const int kc = rest % chunks, st = (rest / chunks) % tiles;
  const int group = rest / chunks / tiles;
  const int b = min(8 * st + lane / 4, g.batch - 1);
  const float4 v = *reinterpret_cast<const float4*>(
      g.x + group * g.x_group_stride + b * g.x_stride + kc * kChunkK +
      32 * (lane % 4) + 4 * i);
  uint2 h, m, l;
  SplitBf16(v.x, v.y, &h.x, &m.x, &l.x);
  SplitBf16(v.z, v.w, &h.y, &m.y, &l.y);
  uint2* out = g.x_parts + PartsIndex(group, tiles, st, chunks, kc, i, lane);
  out[0] = h;
  out[32] = m;
  out[64] = l;
}

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
// products' magnitude on 6144-K rows and 3.8e-7 on 512-K ones (the
// CUDA-core kernel's float sums 0.7e-7 and 1.2e-7). A fresh accumulator a
// 16 K measures the same (4.0e-7), one over 128 K 2.5e-7 on 6144-K rows.
// kSplit: B's parts come split before (xp[nt]: the lane's fragments of its
// 8-sequence tile, kParts a (chunk, i)), not from floats at xb[nt] + k_off.
template <int NT, bool kSplit>
__device__ __forceinline__ void MmaChunk(const uint4& ca, const uint4& cb,
                                         uint16_t sa, uint16_t sb,
                                         const uint32_t* table,
                                         const float* const (&xb)[NT],
                                         const uint2* const (&xp)[NT], int kc,
                                         float (&acc)[NT][4]) {
  const int k_off = kc * kChunkK;
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
        uint2 h, m, l;
        if constexpr (kSplit) {
          const uint2* q = xp[nt] + (kc * 8 + i) * kParts * 32;
          h = __ldg(q);
          m = __ldg(q + 32);
          l = __ldg(q + 64);
        } else {
          const float4 v =
              __ldg(reinterpret_cast<const float4*>(xb[nt] + k_off + 4 * i));
          SplitBf16(v.x, v.y, &h.x, &m.x, &l.x);
          SplitBf16(v.z, v.w, &h.y, &m.y, &l.y);
        }
        MmaBf16(part[nt], a0, a1, a2, a3, l.x, l.y);
        MmaBf16(part[nt], a0, a1, a2, a3, m.x, m.y);
        MmaBf16(part[nt], a0, a1, a2, a3, h.x, h.y);
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
template <int NT, bool kSplit>
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
  const int group = min(r0, g.rows - 1) / g.rows_per_x;
  const int tiles = SequenceTiles(g.batch, NT);
  EnterAfterPriorKernels();
  __syncthreads();  // the table
  for (int b0 = 0; b0 < g.batch; b0 += 8 * NT) {
    float acc[NT][4] = {};
    const float* xb[NT];
    const uint2* xp[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int b = min(b0 + nt * 8 + gq, g.batch - 1);
      xb[nt] = ra.x + b * g.x_stride + 32 * c;
      xp[nt] = kSplit ? g.x_parts + PartsIndex(group, tiles, b0 / 8 + nt,
                                               chunks, 0, 0, lane)
                      : nullptr;
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
      MmaChunk<NT, kSplit>(ca, cb, sa, sb, table, xb, xp, kc, acc);
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

GpuStatus LaunchGemvNvfp4Mma(const Nvfp4Gemv& g, cudaStream_t stream,
                             const LaunchPolicy& policy) {
  // A part keeps at least 8 chunks (2 x 4) of 128 K.
  if (g.x_parts == nullptr || g.batch < kNvfp4SplitOnceFromBatch) {
    return gemv_mma::LaunchTiles(
        g, kChunkK, 4,
        [](auto nt) { return &GemvNvfp4MmaKernel<decltype(nt)::value, false>; },
        stream, policy);
  }
  const int tiles = SequenceTiles(g.batch, gemv_mma::NTiles(g.batch));
  const int64_t threads =
      int64_t{InputGroups(g)} * tiles * (g.k / kChunkK) * 256;
  MG_RETURN_IF_ERROR(LaunchOverlapped(SplitInputsKernel,
                                      static_cast<int>((threads + 255) / 256),
                                      256, 0, stream, policy, g, tiles));
  return gemv_mma::LaunchTiles(
      g, kChunkK, 4,
      [](auto nt) { return &GemvNvfp4MmaKernel<decltype(nt)::value, true>; },
      stream, policy.Then());
}

size_t Nvfp4GemvInputParts(int batch, int64_t inputs) {
  return static_cast<size_t>(SequenceTiles(batch, gemv_mma::NTiles(batch))) *
         inputs * 2 * kParts;
}

}  // namespace moetune::gpu
