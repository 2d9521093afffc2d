#include <atomic>

#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kSelectThreads = 1024;
constexpr int kAttentionThreads = 256;

constexpr int kScoreTokensPerWarp = 4;

// A warp a token at a time, a lane a head: the queries in shared memory
// (rows padded by one: lanes read different rows without bank conflicts),
// the token's key decoded once into the warp's shared row.
__global__ void IndexerScoresKernel(IndexerScores s) {
  extern __shared__ float shared[];
  const int row = s.dim + 1, warps = blockDim.x / 32;
  float* q = shared;                // [heads][dim + 1]
  float* keys = q + s.heads * row;  // [warps][dim]
  const int b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < s.heads * s.dim; i += blockDim.x) {
    q[(i / s.dim) * row + i % s.dim] =
        s.q[static_cast<int64_t>(b) * s.heads * s.dim + i];
  }
  __syncthreads();
  const float w = lane < s.heads ? s.w[b * s.heads + lane] * s.w_scale : 0.0f;
  float* key = keys + warp * s.dim;
  const float* new_key = s.new_key + static_cast<int64_t>(b) * s.dim;
  const int first = (blockIdx.x * warps + warp) * kScoreTokensPerWarp;
  for (int t = first; t < first + kScoreTokensPerWarp && t <= s.context; ++t) {
    const uint8_t* past =
        s.keys + (static_cast<int64_t>(b) * s.context + t) * s.dim;
    for (int d = lane; d < s.dim; d += 32) {
      key[d] = t < s.context ? nvfp4::E4M3ToFloat(past[d]) : new_key[d];
    }
    __syncwarp();
    float dot = 0.0f;
    if (lane < s.heads) {
      const float* qh = q + lane * row;
#pragma unroll 8
      for (int d = 0; d < s.dim; ++d) dot += qh[d] * key[d];
    }
    const float score = WarpSum(w * fmaxf(dot * s.dot_scale, 0.0f));
    if (lane == 0)
      s.scores[static_cast<int64_t>(b) * (s.context + 1) + t] = score;
    __syncwarp();
  }
}

// Floats ordered as unsigned integers (larger float, larger key).
__device__ __forceinline__ uint32_t OrderKey(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The k-th largest key among n (radix select, 8 bits a pass, most
// significant first); *equal_taken = how many keys equal to it are kept.
__device__ uint32_t KthKey(const float* scores, int n, int k, int* hist,
                           int* equal_taken) {
  __shared__ uint32_t prefix_s;
  __shared__ int remaining_s;
  if (threadIdx.x == 0) {
    prefix_s = 0;
    remaining_s = k;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = prefix_s;
    // Lanes with the same digit add once (most scores share their top
    // bytes: plain atomics on one bin would serialize the whole pass).
    for (int base = 0; base < n; base += blockDim.x) {
      const int i = base + threadIdx.x;
      const uint32_t key = i < n ? OrderKey(scores[i]) : 0;
      const int digit =
          (i < n && (key & mask) == prefix) ? int((key >> shift) & 255u) : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) {
        atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int remaining = remaining_s, digit = 255;
      for (; digit > 0 && hist[digit] < remaining; --digit) {
        remaining -= hist[digit];
      }
      remaining_s = remaining;
      prefix_s = prefix | (static_cast<uint32_t>(digit) << shift);
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  *equal_taken = remaining_s;
  return prefix_s;
}

// Exclusive prefix sum of `flag` over the block; *total = the block's sum.
__device__ int BlockExclusiveScan(int flag, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = flag;
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int v = lane < blockDim.x / 32 ? scratch[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += up;
    }
    scratch[lane] = v;  // inclusive warp totals
  }
  __syncthreads();
  *total = scratch[blockDim.x / 32 - 1];
  return inclusive - flag + (warp > 0 ? scratch[warp - 1] : 0);
}

// One block a sequence.
__global__ void TopKKernel(const float* all_scores, int n, int k, int* kept,
                           int* kept_n) {
  __shared__ int hist[256];
  __shared__ int scratch[32];
  const float* scores = all_scores + static_cast<int64_t>(blockIdx.x) * n;
  int* out = kept + static_cast<int64_t>(blockIdx.x) * k;
  if (n <= k) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = i;
    if (threadIdx.x == 0) kept_n[blockIdx.x] = n;
    return;
  }
  int equal_quota = 0;
  const uint32_t kth = KthKey(scores, n, k, hist, &equal_quota);
  int written = 0, equal_seen = 0;
  for (int base = 0; base < n; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const uint32_t key = i < n ? OrderKey(scores[i]) : 0;
    const int equal = (i < n && key == kth) ? 1 : 0;
    int equal_total = 0;
    const int equal_before = BlockExclusiveScan(equal, scratch, &equal_total);
    const int keep = (i < n && key > kth) ||
                     (equal && equal_seen + equal_before < equal_quota);
    int keep_total = 0;
    const int at = BlockExclusiveScan(keep, scratch, &keep_total);
    if (keep) out[written + at] = i;
    written += keep_total;
    equal_seen += equal_total;
  }
  if (threadIdx.x == 0) kept_n[blockIdx.x] = written;
}

// Heads of one block: the largest divisor of `heads` up to kAttentionHeads.
__host__ __device__ inline int HeadsPerBlock(int heads) {
  int g = heads < kAttentionHeads ? heads : kAttentionHeads;
  while (heads % g != 0) --g;
  return g;
}

// Block (split, sequence, head group): stages the split's kept entries in
// shared memory (float, rows padded by one against bank conflicts), scores
// them for the group's heads, and writes each head's partial softmax.
__global__ void SparseAttentionSplitKernel(SparseAttention a) {
  extern __shared__ float shared[];
  const int dim = a.kv_lora + a.rope, row = dim + 1;
  const int hg = HeadsPerBlock(a.heads);
  const int split = blockIdx.x, b = blockIdx.y, h0 = blockIdx.z * hg;
  const int splits = gridDim.x;
  float* query = shared;                      // [hg][dim]
  float* entry = query + hg * dim;            // [tokens][dim + 1]
  float* p = entry + kAttentionTokens * row;  // [hg][tokens]
  for (int i = threadIdx.x; i < hg * dim; i += blockDim.x) {
    const int h = h0 + i / dim, d = i % dim;
    query[i] =
        d < a.kv_lora
            ? a.q_lat[(static_cast<int64_t>(b) * a.heads + h) * a.kv_lora + d]
            : a.q[b * a.q_stride + h * a.q_head_stride + a.rope_offset + d -
                  a.kv_lora];
  }
  const int first = split * kAttentionTokens;
  const int tokens = max(0, min(kAttentionTokens, a.kept_n[b] - first));
  const int* kept = a.kept + static_cast<int64_t>(b) * a.k + first;
  const uint16_t* cache = a.latent + static_cast<int64_t>(b) * a.context * dim;
  const float* fresh = a.new_entry + static_cast<int64_t>(b) * dim;
  // 16-byte loads (8 values), several in flight per thread: the staging is
  // the block's only trip to DRAM.
  const int vectors = dim / 8;
#pragma unroll 4
  for (int i = threadIdx.x; i < tokens * vectors; i += blockDim.x) {
    const int t = i / vectors, v = i % vectors, token = kept[t];
    float* dst = entry + t * row + v * 8;
    if (token == a.context) {
      for (int e = 0; e < 8; ++e) dst[e] = fresh[v * 8 + e];
      continue;
    }
    const uint4 raw = *reinterpret_cast<const uint4*>(
        cache + static_cast<int64_t>(token) * dim + v * 8);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    for (int e = 0; e < 4; ++e) {
      dst[2 * e] = __uint_as_float(words[e] << 16);
      dst[2 * e + 1] = __uint_as_float(words[e] & 0xffff0000u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < hg * tokens; i += blockDim.x) {
    const int h = i / tokens, t = i % tokens;
    float dot = 0.0f;
    for (int d = 0; d < dim; ++d)
      dot += query[h * dim + d] * entry[t * row + d];
    p[h * kAttentionTokens + t] = dot * a.scale;
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* out = a.partial;
  if (warp < hg) {  // warp h: the head's max, weights and sum
    const float s =
        lane < tokens ? p[warp * kAttentionTokens + lane] : -INFINITY;
    const float m = WarpMax(s);
    const float e = lane < tokens ? expf(s - m) : 0.0f;
    if (lane < tokens) p[warp * kAttentionTokens + lane] = e;
    const float l = WarpSum(e);
    float* part =
        out +
        ((static_cast<int64_t>(b) * a.heads + h0 + warp) * splits + split) *
            (a.kv_lora + 2);
    if (lane == 0) {
      part[0] = tokens > 0 ? m : -INFINITY;
      part[1] = l;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < hg * a.kv_lora; i += blockDim.x) {
    const int h = i / a.kv_lora, j = i % a.kv_lora;
    float acc = 0.0f;
    for (int t = 0; t < tokens; ++t)
      acc += p[h * kAttentionTokens + t] * entry[t * row + j];
    out[((static_cast<int64_t>(b) * a.heads + h0 + h) * splits + split) *
            (a.kv_lora + 2) +
        2 + j] = acc;
  }
}

// Block (head, sequence): out_lat = sum_s e^(m_s - M) o_s / sum_s
// e^(m_s - M) l_s; each split's weight computed once, in shared memory.
__global__ void SparseAttentionCombineKernel(SparseAttention a, int splits) {
  extern __shared__ float weight[];  // [splits]
  __shared__ float scratch[32];
  const int h = blockIdx.x, b = blockIdx.y, stride = a.kv_lora + 2;
  const float* part =
      a.partial + (static_cast<int64_t>(b) * a.heads + h) * splits * stride;
  float m = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += blockDim.x)
    m = fmaxf(m, part[s * stride]);
  m = BlockMax(m, scratch);
  float l = 0.0f;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const float ms = part[s * stride];
    weight[s] = ms > -INFINITY ? expf(ms - m) : 0.0f;
    l += weight[s] * part[s * stride + 1];
  }
  l = BlockSum(l, scratch);  // also: every weight is written
  float* out = a.out_lat + (static_cast<int64_t>(b) * a.heads + h) * a.kv_lora;
  for (int j = threadIdx.x; j < a.kv_lora; j += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s)
      acc += weight[s] * part[s * stride + 2 + j];
    out[j] = acc / l;
  }
}

}  // namespace

GpuStatus LaunchIndexerScores(const IndexerScores& s, cudaStream_t stream) {
  if (s.heads > kMaxIndexHeads) {
    return Fail(RunStatus::kCannotImplement,
                "the indexer kernel takes at most 32 heads");
  }
  const int per_block = (kScoreThreads / 32) * kScoreTokensPerWarp;
  const int blocks = (s.context + 1 + per_block - 1) / per_block;
  const size_t smem =
      sizeof(float) * (static_cast<size_t>(s.heads) * (s.dim + 1) +
                       (kScoreThreads / 32) * s.dim);
  IndexerScoresKernel<<<dim3(blocks, s.batch), kScoreThreads, smem, stream>>>(
      s);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus LaunchTopK(const float* scores, int n, int k, int batch, int* kept,
                     int* kept_n, cudaStream_t stream) {
  TopKKernel<<<batch, kSelectThreads, 0, stream>>>(scores, n, k, kept, kept_n);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus LaunchSparseAttention(const SparseAttention& a, cudaStream_t stream) {
  const int dim = a.kv_lora + a.rope, hg = HeadsPerBlock(a.heads);
  const int splits = SparseAttentionSplits(a.k);
  const size_t smem =
      sizeof(float) * (static_cast<size_t>(hg) * dim +
                       kAttentionTokens * (dim + 1) + hg * kAttentionTokens);
  // Raised once to the largest size asked for, not on every launch (the
  // eager step launches it once a layer).
  static std::atomic<size_t> allowed{48 * 1024};
  if (smem > allowed.load()) {
    MG_CUDA(cudaFuncSetAttribute(SparseAttentionSplitKernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
    allowed = smem;
  }
  SparseAttentionSplitKernel<<<dim3(splits, a.batch, a.heads / hg),
                               kAttentionThreads, smem, stream>>>(a);
  MG_CHECK_LAUNCH();
  SparseAttentionCombineKernel<<<dim3(a.heads, a.batch), kAttentionThreads,
                                 splits * sizeof(float), stream>>>(a, splits);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace moetune::gpu
