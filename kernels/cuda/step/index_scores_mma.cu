#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/index_scores_mma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"

namespace moetune::gpu {
namespace {

constexpr int kWarps = 4;
constexpr int kWarpTokens = 16;  // mma's M
constexpr int kBlockTokens = kWarps * kWarpTokens;
constexpr int kHeadTiles = kMaxIndexHeads / 8;  // mma's N = 8 heads

// Two E4M3 bytes (the lower one at the lower dim) to two FP16 (exact).
__device__ __forceinline__ uint32_t E4m3x2ToHalf2(uint32_t bytes) {
  uint32_t out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n"
      : "=r"(out)
      : "h"(static_cast<uint16_t>(bytes)));
  return out;
}

// The dims lane c feeds mma k-step j: mma's k order is permuted alike for
// keys and queries (a dot product does not care) so that a lane's 16-byte
// key load (16 dims) covers four k-steps: 4 dims a step from
// 64 (j / 4) + 16 c + 4 (j % 4).
__device__ __forceinline__ int StepDims(int j, int c) {
  return 64 * (j / 4) + 16 * c + 4 * (j % 4);
}

// Each lane's query fragments for every (k-step, head tile), hi and lo, in
// shared memory [D / 16][kHeadTiles][32 lanes]; heads past s.heads zero;
// and the scaled head weights.
template <int D>
__device__ void StageQueryFragments(const IndexerScores& s, int b, uint4* qf,
                                    float* w) {
  constexpr int kEntries = D / 16 * kHeadTiles * 32;
  for (int i = threadIdx.x; i < kEntries; i += blockDim.x) {
    const int lane = i % 32, nt = (i / 32) % kHeadTiles,
              j = i / 32 / kHeadTiles;
    const int head = nt * 8 + lane / 4;
    float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (head < s.heads) {
      q = *reinterpret_cast<const float4*>(
          s.q + (int64_t{b} * s.heads + head) * D + StepDims(j, lane % 4));
    }
    uint4 f;
    SplitHalf(q.x, q.y, &f.x, &f.z);
    SplitHalf(q.z, q.w, &f.y, &f.w);
    qf[i] = f;  // {hi b0, hi b1, lo b0, lo b1}
  }
  for (int h = threadIdx.x; h < kMaxIndexHeads; h += blockDim.x) {
    w[h] = h < s.heads ? s.w[b * s.heads + h] * s.w_scale : 0.0f;
  }
}

// The new token's score in float, by one warp (a lane a head).
template <int D>
__device__ void FreshScore(const IndexerScores& s, int b, const float* w,
                           int lane) {
  float dot = 0.0f;
  if (lane < s.heads) {
    const float* q = s.q + (int64_t{b} * s.heads + lane) * D;
    const float* k = s.new_key + int64_t{b} * D;
    for (int d = 0; d < D; ++d) dot += q[d] * k[d];
  }
  float score = w[lane] * fmaxf(dot * s.dot_scale, 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    score += __shfl_xor_sync(0xffffffffu, score, o);
  }
  if (lane == 0) s.scores[int64_t{b} * (s.context + 1) + s.context] = score;
}

// Warp: tokens t0 .. t0 + 15 (rows g and g + 8 for lane (g, c)) x 32 heads.
template <int D>
__device__ void PastScores(const IndexerScores& s, int b, int t0,
                           const uint4* qf, const float* w, int lane) {
  const int g = lane / 4, c = lane % 4;
  const int last = s.context - 1;
  const uint8_t* ka =
      s.keys + (int64_t{b} * s.key_stride + min(t0 + g, last)) * D + 16 * c;
  const uint8_t* kb =
      s.keys + (int64_t{b} * s.key_stride + min(t0 + g + 8, last)) * D + 16 * c;
  uint4 ra[D / 64], rb[D / 64];
#pragma unroll
  for (int i = 0; i < D / 64; ++i) {
    ra[i] = *reinterpret_cast<const uint4*>(ka + 64 * i);
    rb[i] = *reinterpret_cast<const uint4*>(kb + 64 * i);
  }
  float acc[kHeadTiles][4] = {};
#pragma unroll
  for (int j = 0; j < D / 16; ++j) {
    const uint4& x = ra[j / 4];
    const uint4& y = rb[j / 4];
    const uint32_t wa = j % 4 == 0   ? x.x
                        : j % 4 == 1 ? x.y
                        : j % 4 == 2 ? x.z
                                     : x.w;
    const uint32_t wb = j % 4 == 0   ? y.x
                        : j % 4 == 1 ? y.y
                        : j % 4 == 2 ? y.z
                                     : y.w;
    const uint32_t a0 = E4m3x2ToHalf2(wa & 0xffffu);
    const uint32_t a1 = E4m3x2ToHalf2(wb & 0xffffu);
    const uint32_t a2 = E4m3x2ToHalf2(wa >> 16);
    const uint32_t a3 = E4m3x2ToHalf2(wb >> 16);
#pragma unroll
    for (int nt = 0; nt < kHeadTiles; ++nt) {
      const uint4 f = qf[(j * kHeadTiles + nt) * 32 + lane];
      MmaF16(acc[nt], a0, a1, a2, a3, f.z, f.w);
      MmaF16(acc[nt], a0, a1, a2, a3, f.x, f.y);
    }
  }
  // Lane (g, c) holds heads nt * 8 + 2c, + 1 of tokens g and g + 8.
  float sa = 0.0f, sb = 0.0f;
#pragma unroll
  for (int nt = 0; nt < kHeadTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float wh = w[nt * 8 + 2 * c + e];
      sa += wh * fmaxf(acc[nt][e] * s.dot_scale, 0.0f);
      sb += wh * fmaxf(acc[nt][2 + e] * s.dot_scale, 0.0f);
    }
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    sa += __shfl_xor_sync(0xffffffffu, sa, o);
    sb += __shfl_xor_sync(0xffffffffu, sb, o);
  }
  float* out = s.scores + int64_t{b} * (s.context + 1);
  if (c == 0 && t0 + g < s.context) out[t0 + g] = sa;
  if (c == 0 && t0 + g + 8 < s.context) out[t0 + g + 8] = sb;
}

// Block (64 past tokens, sequence); block 0's first warp also scores the
// new token.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    IndexerScoresMmaKernel(IndexerScores s) {
  __shared__ uint4 qf[D / 16 * kHeadTiles * 32];
  __shared__ float w[kMaxIndexHeads];
  EnterAfterPriorKernels();
  const int b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  StageQueryFragments<D>(s, b, qf, w);
  __syncthreads();
  if (blockIdx.x == 0 && warp == 0) FreshScore<D>(s, b, w, lane);
  const int t0 = blockIdx.x * kBlockTokens + warp * kWarpTokens;
  if (t0 < s.context) PastScores<D>(s, b, t0, qf, w, lane);
}

}  // namespace

bool IndexerScoresMmaFits(const IndexerScores& s) {
  const auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  return (s.dim == 64 || s.dim == 128 || s.dim == 256) &&
         s.heads <= kMaxIndexHeads && aligned(s.q) && aligned(s.keys);
}

GpuStatus LaunchIndexerScoresMma(const IndexerScores& s, cudaStream_t stream) {
  const dim3 grid(std::max(1, (s.context + kBlockTokens - 1) / kBlockTokens),
                  s.batch);
  switch (s.dim) {
    case 64:
      return LaunchOverlapped(IndexerScoresMmaKernel<64>, grid, kWarps * 32, 0,
                              stream, s);
    case 128:
      return LaunchOverlapped(IndexerScoresMmaKernel<128>, grid, kWarps * 32, 0,
                              stream, s);
    case 256:
      return LaunchOverlapped(IndexerScoresMmaKernel<256>, grid, kWarps * 32, 0,
                              stream, s);
  }
  return Fail(RunStatus::kCannotImplement,
              "the tensor-core indexer takes head dims 64, 128 or 256, got " +
                  std::to_string(s.dim));
}

}  // namespace moetune::gpu
