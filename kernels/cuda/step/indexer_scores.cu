// LaunchIndexerScores (mla.cuh): the DSA indexer's score of every past token,
// on CUDA cores, or on tensor cores where index_scores_mma.cuh fits.
#include <string>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/fp8_decode.cuh"
#include "kernels/cuda/step/index_scores_mma.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu {
namespace {

// kScoreLanes lanes a token, lane g of them the heads h = kScoreLanes j + g:
// the token's key is read 16 FP8 values at a time and each head's query
// comes from shared memory, so a 16-byte shared load feeds 4 FMAs; the
// accumulators are independent chains (no branch between heads: the
// queries are padded to 32 heads with zero rows and weights). The partial
// sums meet by shuffles. Query rows are dim + 4 floats apart, so the lanes
// of a token read different banks.
constexpr int kScoreLanes = 8;
constexpr int kScoreHeadsPerLane = kMaxIndexHeads / kScoreLanes;
constexpr int kScoreBlock = 128;

// The sequence's queries (zero rows past `heads`) and scaled weights, with
// 16-byte loads all in flight at once.
__device__ void StageIndexQueries(const IndexerScores& s, int b, int qrow,
                                  float* q, float* w) {
  const int quads = s.dim / 4, total = kMaxIndexHeads * quads;
  const float4* src =
      reinterpret_cast<const float4*>(s.q + int64_t{b} * s.heads * s.dim);
#pragma unroll 8
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const int h = i / quads, d4 = i % quads;
    reinterpret_cast<float4*>(q + h * qrow)[d4] =
        h < s.heads ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  for (int h = threadIdx.x; h < kMaxIndexHeads; h += blockDim.x) {
    w[h] = h < s.heads ? s.w[b * s.heads + h] * s.w_scale : 0.0f;
  }
}

__global__ void __launch_bounds__(kScoreBlock)
    IndexerScoresKernel(IndexerScores s) {
  EnterAfterPriorKernels();
  extern __shared__ float4 shared4[];
  const int qrow = s.dim + 4;
  float* q = reinterpret_cast<float*>(shared4);  // [32][qrow]
  float* w = q + kMaxIndexHeads * qrow;          // [32], scaled
  const int b = blockIdx.y;
  StageIndexQueries(s, b, qrow, q, w);
  __syncthreads();
  const int g = threadIdx.x % kScoreLanes;
  const int t =
      blockIdx.x * (kScoreBlock / kScoreLanes) + threadIdx.x / kScoreLanes;
  const int tc = min(t, s.context);  // lanes past the end compute a copy
  float acc[kScoreHeadsPerLane] = {};
  const uint8_t* past =
      s.keys + (static_cast<int64_t>(b) * s.key_stride + tc) * s.dim;
  const float* fresh = s.new_key + static_cast<int64_t>(b) * s.dim;
  for (int d0 = 0; d0 < s.dim; d0 += 16) {
    float k[16];
    if (tc < s.context) {
      const uint4 raw = *reinterpret_cast<const uint4*>(past + d0);
      DecodeE4M3x4(raw.x, k);
      DecodeE4M3x4(raw.y, k + 4);
      DecodeE4M3x4(raw.z, k + 8);
      DecodeE4M3x4(raw.w, k + 12);
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) k[i] = fresh[d0 + i];
    }
#pragma unroll
    for (int j = 0; j < kScoreHeadsPerLane; ++j) {
      const float4* qh = reinterpret_cast<const float4*>(
          q + (j * kScoreLanes + g) * qrow + d0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 v = qh[i];
        acc[j] += v.x * k[4 * i] + v.y * k[4 * i + 1] + v.z * k[4 * i + 2] +
                  v.w * k[4 * i + 3];
      }
    }
  }
  float score = 0.0f;
#pragma unroll
  for (int j = 0; j < kScoreHeadsPerLane; ++j) {
    score += w[j * kScoreLanes + g] * fmaxf(acc[j] * s.dot_scale, 0.0f);
  }
#pragma unroll
  for (int o = 1; o < kScoreLanes; o <<= 1) {
    score += __shfl_xor_sync(0xffffffffu, score, o);
  }
  if (g == 0 && t <= s.context) {
    s.scores[static_cast<int64_t>(b) * (s.context + 1) + t] = score;
  }
}

}  // namespace

GpuStatus LaunchIndexerScores(const IndexerScores& s, cudaStream_t stream,
                              const LaunchPolicy& policy) {
  if (s.heads > kMaxIndexHeads || s.dim % 16 != 0) {
    return Fail(RunStatus::kCannotImplement,
                "the indexer kernel takes at most 32 heads and a head dim "
                "that is a multiple of 16, got " +
                    std::to_string(s.heads) + " x " + std::to_string(s.dim));
  }
  if (IndexerScoresMmaFits(s)) return LaunchIndexerScoresMma(s, stream, policy);
  const int per_block = kScoreBlock / kScoreLanes;
  const int blocks = (s.context + 1 + per_block - 1) / per_block;
  const size_t smem =
      sizeof(float) * kMaxIndexHeads * (static_cast<size_t>(s.dim) + 5);
  return LaunchOverlapped(IndexerScoresKernel, dim3(blocks, s.batch),
                          kScoreBlock, smem, stream, policy, s);
}

}  // namespace moetune::gpu
