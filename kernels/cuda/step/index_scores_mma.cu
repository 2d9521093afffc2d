#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/index_scores_mma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu {
namespace {

constexpr int kWarps = 4;
constexpr int kWarpTokens = 16;                 // mma's M
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
// and the scaled head weights. Every thread's queries are loaded before any
// is split: the block's one trip to L2 on the way to its first product
// (one load a loop turn made the trips in sequence).
template <int D>
__device__ void StageQueryFragments(const IndexerScores& s, int b, uint4* qf,
                                    float* w) {
  constexpr int kEntries = D / 16 * kHeadTiles * 32;
  constexpr int kPerThread = kEntries / (kWarps * 32);
  static_assert(kEntries % (kWarps * 32) == 0);
  float4 q[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int i = threadIdx.x + u * kWarps * 32;
    const int lane = i % 32, nt = (i / 32) % kHeadTiles,
              j = i / 32 / kHeadTiles;
    const int head = nt * 8 + lane / 4;
    q[u] = head < s.heads ? *reinterpret_cast<const float4*>(
                                s.q + (int64_t{b} * s.heads + head) * D +
                                StepDims(j, lane % 4))
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    uint4 f;
    SplitHalf(q[u].x, q[u].y, &f.x, &f.z);
    SplitHalf(q[u].z, q[u].w, &f.y, &f.w);
    qf[threadIdx.x + u * kWarps * 32] = f;  // {hi b0, hi b1, lo b0, lo b1}
  }
  for (int h = threadIdx.x; h < kMaxIndexHeads; h += blockDim.x) {
    w[h] = h < s.heads ? s.w[b * s.heads + h] * s.w_scale : 0.0f;
  }
}

// The new token's score in float, by the whole block: warp w takes heads w,
// w + kWarps, ..., a lane every 32nd dim, every load of a warp's heads
// issued before any is summed, so the block makes one trip to L2 for it.
// (One warp, a lane a head walking its dims, would make 8 dependent trips
// in block 0 alone, ~4 us on the kernel's critical path at batch 1.)
template <int D>
__device__ void FreshScore(const IndexerScores& s, int b, const float* w,
                           int warp, int lane, float* warp_sum) {
  constexpr int kHeadsPerWarp = kMaxIndexHeads / kWarps, kDimsPerLane = D / 32;
  const float* k = s.new_key + int64_t{b} * D;
  float kd[kDimsPerLane];
#pragma unroll
  for (int j = 0; j < kDimsPerLane; ++j) kd[j] = k[lane + 32 * j];
  float dot[kHeadsPerWarp];
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) {
    const int head = warp + kWarps * i;
    const float* q = s.q + (int64_t{b} * s.heads + min(head, s.heads - 1)) * D;
    dot[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) dot[i] += q[lane + 32 * j] * kd[j];
  }
  float score = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) {
    const float sum = WarpSum(dot[i]);  // w is 0 past s.heads
    score += w[warp + kWarps * i] * fmaxf(sum * s.dot_scale, 0.0f);
  }
  if (lane == 0) warp_sum[warp] = score;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < kWarps; ++i) total += warp_sum[i];
    s.scores[int64_t{b} * (s.context + 1) + s.context] = total;
  }
}

// Lane (g, c)'s key bytes of tokens t0 + g and t0 + g + 8 (16 dims a
// 64-dim group). Past keys are this step's inputs, not any kernel's
// outputs, so they are loaded before the wait for the kernels before.
template <int D>
struct KeyFragments {
  uint4 a[D / 64], b[D / 64];
};

template <int D>
__device__ __forceinline__ KeyFragments<D> LoadKeys(const IndexerScores& s,
                                                    int b, int t0, int lane) {
  const int g = lane / 4, c = lane % 4;
  const int last = max(s.context - 1, 0);
  const uint8_t* ka =
      s.keys + (int64_t{b} * s.key_stride + min(t0 + g, last)) * D + 16 * c;
  const uint8_t* kb =
      s.keys + (int64_t{b} * s.key_stride + min(t0 + g + 8, last)) * D + 16 * c;
  KeyFragments<D> k;
#pragma unroll
  for (int i = 0; i < D / 64; ++i) {
    k.a[i] = *reinterpret_cast<const uint4*>(ka + 64 * i);
    k.b[i] = *reinterpret_cast<const uint4*>(kb + 64 * i);
  }
  return k;
}

__device__ __forceinline__ uint32_t Word(const uint4& x, int i) {
  return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}

// The warp's 16 tokens (rows g and g + 8 for lane (g, c)) x its HT head
// tiles from nt0: the weighted ReLU'd dot products summed over those heads,
// *sa for token g and *sb for g + 8 (in every lane of the quad).
template <int D, int HT>
__device__ void PastScores(const IndexerScores& s, const KeyFragments<D>& k,
                           int nt0, const uint4* qf, const float* w, int lane,
                           float* sa, float* sb) {
  const int c = lane % 4;
  float acc[HT][4] = {};
#pragma unroll
  for (int j = 0; j < D / 16; ++j) {
    const uint32_t wa = Word(k.a[j / 4], j % 4), wb = Word(k.b[j / 4], j % 4);
    const uint32_t a0 = E4m3x2ToHalf2(wa & 0xffffu);
    const uint32_t a1 = E4m3x2ToHalf2(wb & 0xffffu);
    const uint32_t a2 = E4m3x2ToHalf2(wa >> 16);
    const uint32_t a3 = E4m3x2ToHalf2(wb >> 16);
#pragma unroll
    for (int nt = 0; nt < HT; ++nt) {
      const uint4 f = qf[(j * kHeadTiles + nt0 + nt) * 32 + lane];
      MmaF16(acc[nt], a0, a1, a2, a3, f.z, f.w);
      MmaF16(acc[nt], a0, a1, a2, a3, f.x, f.y);
    }
  }
  // Lane (g, c) holds heads nt * 8 + 2c, + 1 of tokens g and g + 8.
  *sa = *sb = 0.0f;
#pragma unroll
  for (int nt = 0; nt < HT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float wh = w[(nt0 + nt) * 8 + 2 * c + e];
      *sa += wh * fmaxf(acc[nt][e] * s.dot_scale, 0.0f);
      *sb += wh * fmaxf(acc[nt][2 + e] * s.dot_scale, 0.0f);
    }
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    *sa += __shfl_xor_sync(0xffffffffu, *sa, o);
    *sb += __shfl_xor_sync(0xffffffffu, *sb, o);
  }
}

// The block's scores of one round's token tiles, summed over the heads'
// parts: with every head in one warp (kParts 1) each quad's lane 0 stores
// its two tokens; else the parts meet in shared memory in a fixed order.
template <int kParts>
__device__ void StoreRoundScores(const IndexerScores& s, int b, int t0,
                                 bool live, int tile, int part, int warp,
                                 int lane, float sa, float sb,
                                 float (&part_sum)[kWarps][kWarpTokens]) {
  float* row = s.scores + int64_t{b} * (s.context + 1);
  const int g = lane / 4;
  if constexpr (kParts == 1) {
    if (!live || lane % 4 != 0) return;
    if (t0 + g < s.context) row[t0 + g] = sa;
    if (t0 + g + 8 < s.context) row[t0 + g + 8] = sb;
  } else {
    if (lane % 4 == 0) {
      part_sum[warp][g] = sa;
      part_sum[warp][g + 8] = sb;
    }
    __syncthreads();
    if (part == 0 && live && lane < kWarpTokens) {
      float score = 0.0f;
      for (int p = 0; p < kParts; ++p) {
        score += part_sum[tile * kParts + p][lane];
      }
      if (t0 + lane < s.context) row[t0 + lane] = score;
    }
    __syncthreads();  // part_sum is taken again next round
  }
}

// Block (R rounds of TT token tiles of 16 past tokens, sequence): its 4
// warps are TT tiles x 4 / TT parts of the 32 heads. Fewer tokens a block
// where the batch and context make too few blocks to fill the GPU (batch 1
// at 4096 tokens: 64 blocks of 64 tokens take 10 us for 0.5 MB); several rounds
// where they make many, so that a block stages the queries (16 KB from L2 at
// GLM-5's dims, twice a round's keys) once for more keys; the next round's keys
// are loaded while this one's are summed. Block 0 also scores the new token.
template <int D, int TT, int R>
__global__ void __launch_bounds__(kWarps * 32)
    IndexerScoresMmaKernel(IndexerScores s) {
  constexpr int kParts = kWarps / TT, kHt = kHeadTiles / kParts;
  __shared__ uint4 qf[D / 16 * kHeadTiles * 32];
  __shared__ float w[kMaxIndexHeads];
  __shared__ float part_sum[kWarps][kWarpTokens];
  __shared__ float fresh_sum[kWarps];
  const int b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = warp / kParts, part = warp % kParts;
  const auto first_token = [&](int r) {
    return ((blockIdx.x * R + r) * TT + tile) * kWarpTokens;
  };
  KeyFragments<D> keys;
  if (first_token(0) < s.context)
    keys = LoadKeys<D>(s, b, first_token(0), lane);
  EnterAfterPriorKernels();
  StageQueryFragments<D>(s, b, qf, w);
  __syncthreads();
  if (blockIdx.x == 0) FreshScore<D>(s, b, w, warp, lane, fresh_sum);
#pragma unroll 1
  for (int r = 0; r < R; ++r) {
    const int t0 = first_token(r);
    const bool live = t0 < s.context;
    KeyFragments<D> next = keys;
    if (r + 1 < R && first_token(r + 1) < s.context) {
      next = LoadKeys<D>(s, b, first_token(r + 1), lane);
    }
    float sa = 0.0f, sb = 0.0f;
    if (live) PastScores<D, kHt>(s, keys, part * kHt, qf, w, lane, &sa, &sb);
    StoreRoundScores<kParts>(s, b, t0, live, tile, part, warp, lane, sa, sb,
                             part_sum);
    keys = next;
  }
}

// Token tiles a block (TT) and rounds of them (R): the most tiles (fewest
// repeats of the query staging) that still give every SM two blocks; then,
// at four tiles, the most rounds that still give it kRoundBlocksPerSm.
constexpr int kRoundBlocksPerSm = 3;
struct ScoreBlocks {
  int tiles = 1, rounds = 1;
};
ScoreBlocks BlocksFor(const IndexerScores& s, int sm_count) {
  const int tiles = std::max(1, (s.context + kWarpTokens - 1) / kWarpTokens);
  const auto blocks = [&](int per_block) {
    return int64_t{(tiles + per_block - 1) / per_block} * s.batch;
  };
  ScoreBlocks p;
  for (int tt : {4, 2}) {
    if (blocks(tt) >= 2 * sm_count) {
      p.tiles = tt;
      break;
    }
  }
  if (p.tiles != 4) return p;
  for (int r : {8, 4, 2}) {
    if (blocks(4 * r) >= kRoundBlocksPerSm * sm_count) {
      p.rounds = r;
      break;
    }
  }
  return p;
}

int SmCountOf(const IndexerScores& s) {
  return s.sm_count > 0 ? s.sm_count : CurrentDeviceSmCount();
}

template <int D, int TT, int R>
GpuStatus Launch(const IndexerScores& s, int tiles, cudaStream_t stream,
                 const LaunchPolicy& policy) {
  const dim3 grid((tiles + TT * R - 1) / (TT * R), s.batch);
  return LaunchOverlapped(IndexerScoresMmaKernel<D, TT, R>, grid, kWarps * 32,
                          0, stream, policy, s);
}

template <int D>
GpuStatus LaunchForDim(const IndexerScores& s, cudaStream_t stream,
                       const LaunchPolicy& policy) {
  const ScoreBlocks p = BlocksFor(s, SmCountOf(s));
  const int tiles = std::max(1, (s.context + kWarpTokens - 1) / kWarpTokens);
  if (p.tiles == 4) {
    switch (p.rounds) {
      case 8:
        return Launch<D, 4, 8>(s, tiles, stream, policy);
      case 4:
        return Launch<D, 4, 4>(s, tiles, stream, policy);
      case 2:
        return Launch<D, 4, 2>(s, tiles, stream, policy);
    }
    return Launch<D, 4, 1>(s, tiles, stream, policy);
  }
  if (p.tiles == 2) return Launch<D, 2, 1>(s, tiles, stream, policy);
  return Launch<D, 1, 1>(s, tiles, stream, policy);
}

}  // namespace

bool IndexerScoresMmaFits(const IndexerScores& s) {
  const auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  return (s.dim == 64 || s.dim == 128 || s.dim == 256) &&
         s.heads <= kMaxIndexHeads && aligned(s.q) && aligned(s.keys);
}

GpuStatus LaunchIndexerScoresMma(const IndexerScores& s, cudaStream_t stream,
                                 const LaunchPolicy& policy) {
  switch (s.dim) {
    case 64:
      return LaunchForDim<64>(s, stream, policy);
    case 128:
      return LaunchForDim<128>(s, stream, policy);
    case 256:
      return LaunchForDim<256>(s, stream, policy);
  }
  return Fail(RunStatus::kCannotImplement,
              "the tensor-core indexer takes head dims 64, 128 or 256, got " +
                  std::to_string(s.dim));
}

}  // namespace moetune::gpu
