#include <cstdint>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/gemv_mma.cuh"
#include "kernels/cuda/step/gemv_mma_tiles.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/mma_parts.cuh"

namespace moetune::gpu {
namespace {

using gemv_detail::GemvRow;
using gemv_detail::OutputOf;
using gemv_detail::RowOf;

using gemv_mma::kTileRows;
using gemv_mma::kWarps;
constexpr int kChunkK = 32;    // K of one 16-byte load by each of 4 lanes
constexpr int kMmaUnroll = 4;  // chunks of weights in flight a warp

// One 32-K chunk. Lane (g, c) loaded rows g and g + 8's eight weights at K
// 8c..8c+7 of the chunk (one 16-byte load each); mma's k order is permuted
// the same way for A and B (a sum does not care), so B is the same eight K
// of sequence g of each n-tile: mma 1 takes K 8c+0..3, mma 2 K 8c+4..7.
// The chunk's products go to a fresh accumulator that is then added in
// float: accumulated in the tensor cores over a whole row (~400 mma at K =
// 6144) the sums are off by enough to fail three tiny-model step tests,
// which the CUDA-core GEMV's outputs perturbed by 1e-5 also fail and by
// 1e-6 do not; the GEMV test bounds the error.
template <int NT>
__device__ __forceinline__ void MmaChunk(const uint4& wa, const uint4& wb,
                                         const float* const (&xb)[NT],
                                         int k_off, float (&acc)[NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const float4 v0 = __ldg(reinterpret_cast<const float4*>(xb[nt] + k_off));
    const float4 v1 =
        __ldg(reinterpret_cast<const float4*>(xb[nt] + k_off) + 1);
    uint32_t h[4], m[4], l[4];
    SplitBf16(v0.x, v0.y, &h[0], &m[0], &l[0]);
    SplitBf16(v0.z, v0.w, &h[1], &m[1], &l[1]);
    SplitBf16(v1.x, v1.y, &h[2], &m[2], &l[2]);
    SplitBf16(v1.z, v1.w, &h[3], &m[3], &l[3]);
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    MmaBf16(part, wa.x, wb.x, wa.y, wb.y, l[0], l[1]);
    MmaBf16(part, wa.z, wb.z, wa.w, wb.w, l[2], l[3]);
    MmaBf16(part, wa.x, wb.x, wa.y, wb.y, m[0], m[1]);
    MmaBf16(part, wa.z, wb.z, wa.w, wb.w, m[2], m[3]);
    MmaBf16(part, wa.x, wb.x, wa.y, wb.y, h[0], h[1]);
    MmaBf16(part, wa.z, wb.z, wa.w, wb.w, h[2], h[3]);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] += part[e];
  }
}

// A round of a lane's weights: chunks kc0 + ks * u of rows ra (wa) and rb
// (wb), those below `chunks`.
__device__ __forceinline__ void LoadChunks(const GemvRow& ra, const GemvRow& rb,
                                           int kc0, int ks, int chunks, int c,
                                           uint4 (&wa)[kMmaUnroll],
                                           uint4 (&wb)[kMmaUnroll]) {
#pragma unroll
  for (int u = 0; u < kMmaUnroll; ++u) {
    const int kc = kc0 + ks * u;
    if (kc < chunks) {
      wa[u] = __ldg(ra.w + kc * 4 + c);
      wb[u] = __ldg(rb.w + kc * 4 + c);
    }
  }
}

// Block = kWarps / ks tiles of 16 rows x ks parts of K; warp (tile,
// part) sums every ks-th 32-K chunk of its rows, kMmaUnroll chunks of
// weights in flight, for 8 * NT sequences a pass (more passes re-read the
// rows, from L2).
template <int NT>
__global__ void __launch_bounds__(kWarps * 32, 2)
    GemvBf16MmaKernel(Bf16Gemv g, int ks) {
  __shared__ gemv_mma::Partials<NT> partial;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gq = lane >> 2, c = lane & 3;
  const int tiles_per_block = kWarps / ks;
  const int r0 = (blockIdx.x * tiles_per_block + warp / ks) * kTileRows;
  const int part = warp % ks;
  const bool live = r0 < g.rows;
  const int last = g.rows - 1;
  const GemvRow ra = RowOf(g, min(r0 + gq, last));
  const GemvRow rb = RowOf(g, min(r0 + gq + 8, last));
  const int chunks = g.k / kChunkK;
  // The first round of weights before the wait (no kernel writes them):
  // the step at batch 4 -4 % (the CUDA-core kernel of one and two
  // sequences loses with the same).
  uint4 wa[kMmaUnroll], wb[kMmaUnroll];
  if (live) LoadChunks(ra, rb, part, ks, chunks, c, wa, wb);
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += 8 * NT) {
    float acc[NT][4] = {};
    const float* xb[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      // Past the batch: the last sequence (valid memory; unused columns).
      const int b = min(b0 + nt * 8 + gq, g.batch - 1);
      xb[nt] = ra.x + b * g.x_stride + 8 * c;
    }
    for (int kc0 = part; live && kc0 < chunks; kc0 += ks * kMmaUnroll) {
      if (b0 > 0 || kc0 != part) LoadChunks(ra, rb, kc0, ks, chunks, c, wa, wb);
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        const int kc = kc0 + ks * u;
        if (kc < chunks) MmaChunk<NT>(wa[u], wb[u], xb, kc * kChunkK, acc);
      }
    }
    gemv_mma::KeepPartials<NT>(acc, partial, warp, lane);
    __syncthreads();
    gemv_mma::StoreTiles<NT>(
        g.rows, g.batch, partial, tiles_per_block, ks, b0,
        [&](int r, int b, float sum) { *OutputOf(g, r, b) = sum; });
    __syncthreads();
  }
}

}  // namespace

bool GemvBf16MmaFits(const Bf16Gemv& g) { return gemv_mma::Fits(g, kChunkK); }

GpuStatus LaunchGemvBf16Mma(const Bf16Gemv& g, cudaStream_t stream,
                            const LaunchPolicy& policy) {
  // A part keeps at least 16 chunks (2 x 8) of 32 K.
  return gemv_mma::LaunchTiles(
      g, kChunkK, 8,
      [](auto nt) { return &GemvBf16MmaKernel<decltype(nt)::value>; }, stream,
      policy);
}

}  // namespace moetune::gpu
