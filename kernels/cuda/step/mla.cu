// LaunchSparseAttention and LaunchAttentionQueries (mla.cuh): absorbed MLA
// over the kept tokens, split over them and combined.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <atomic>
#include <string>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/fp8_decode.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/mla_mma.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"
#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

constexpr int kAttentionThreads = 256;

// Heads of one block: the largest divisor of `heads` up to kAttentionHeads
// (down to 2) whose blocks still number at least 3/4 of the SMs, counted in
// kAttentionHeads-head groups (under data-parallel attention a rank's 64
// heads make 8 of them; pairs of heads stage each entry 32 times: 25 ms of
// a 61 ms step at batch 32). A block stages its split's entries once for
// all its heads. At TP8 (8 heads), 64 splits: batch 1 takes 4 (128
// blocks), batch 2 and up 8. TP8, context 4096, graph on, against 2 heads
// a block where splits x batch make fewer than 2 blocks an SM: batch 2
// with 4 or 8 heads 9.47-9.48 ms against 10.22 (2 heads make 512 blocks:
// 1.3 waves of three an SM), batch 1 with 4 heads 7.04 against 7.07, with
// 8 (64 blocks) 7.12.
inline int HeadsPerBlock(int heads, int splits_x_batch, int sm_count) {
  const int groups = (heads + kAttentionHeads - 1) / kAttentionHeads;
  int most = kAttentionHeads;
  while (most > 2 && 4 * splits_x_batch * groups * (kAttentionHeads / most) <
                         3 * sm_count) {
    most /= 2;
  }
  int g = heads < most ? heads : most;
  while (heads % g != 0) --g;
  return g;
}

// Entry rows in shared memory: dim + 4 floats, so that rows stay 16-byte
// aligned and the 8 lanes of a quarter-warp reading 16 bytes of 8
// different rows hit different banks.
__host__ __device__ inline int EntryRow(int dim) { return dim + 4; }

// Stages the split's kept entries as float rows: the kept indices first
// (so that no cache load waits on an index load), then 16-byte loads,
// kStageLoads in flight per thread (the block's only trip to DRAM). The new
// token's entry comes from this step's float buffer; its slot still issues
// a (discarded) load of a valid cache row, so the loads stay unconditional.
constexpr int kStageLoads = 8;

__device__ void StageEntries(const SparseAttention& a, int b, int first,
                             int tokens, int* kept_s, float* entry) {
  const int dim = a.kv_lora + a.rope, row = EntryRow(dim), vectors = dim / 8;
  const int* kept = a.kept + static_cast<int64_t>(b) * a.k + first;
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) kept_s[t] = kept[t];
  __syncthreads();
  const uint16_t* cache =
      a.latent + static_cast<int64_t>(b) * a.cache_stride * dim;
  const float* fresh = a.new_entry + static_cast<int64_t>(b) * dim;
  const int total = tokens * vectors, last = max(a.context - 1, 0);
  for (int base = threadIdx.x; base < total; base += kStageLoads * blockDim.x) {
    uint4 raw[kStageLoads];
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = base + u * blockDim.x;
      const int token = i < total ? min(kept_s[i / vectors], last) : 0;
      raw[u] = i < total && a.context > 0
                   ? *reinterpret_cast<const uint4*>(
                         cache + static_cast<int64_t>(token) * dim +
                         (i % vectors) * 8)
                   : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = base + u * blockDim.x;
      if (i >= total) break;
      const int t = i / vectors, v = i % vectors;
      float4* dst = reinterpret_cast<float4*>(entry + t * row + v * 8);
      if (kept_s[t] == a.context) {
        const float4* src = reinterpret_cast<const float4*>(fresh + v * 8);
        dst[0] = src[0];
        dst[1] = src[1];
        continue;
      }
      dst[0] = make_float4(__uint_as_float(raw[u].x << 16),
                           __uint_as_float(raw[u].x & 0xffff0000u),
                           __uint_as_float(raw[u].y << 16),
                           __uint_as_float(raw[u].y & 0xffff0000u));
      dst[1] = make_float4(__uint_as_float(raw[u].z << 16),
                           __uint_as_float(raw[u].z & 0xffff0000u),
                           __uint_as_float(raw[u].w << 16),
                           __uint_as_float(raw[u].w & 0xffff0000u));
    }
  }
}

// StageEntries for the FP8 cache: a token's row is kv_lora / 16 vectors of
// 16 E4M3 latent values (each decoded with the hardware's conversion and
// scaled by its group's FP32 scale, loaded beside it), then rope / 8
// vectors of 8 BF16 rope values; the same kStageLoads loads in flight, the
// same float rows in shared memory.
__device__ __forceinline__ void StoreScaled(const uint32_t* words, float scale,
                                            float* dst) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    float v[4];
    DecodeE4M3x4(words[w], v);
    reinterpret_cast<float4*>(dst)[w] =
        make_float4(v[0] * scale, v[1] * scale, v[2] * scale, v[3] * scale);
  }
}

__device__ __forceinline__ void StoreBf16x8(const uint4& raw, float* dst) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(
      __uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
      __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u));
  reinterpret_cast<float4*>(dst)[1] = make_float4(
      __uint_as_float(raw.z << 16), __uint_as_float(raw.z & 0xffff0000u),
      __uint_as_float(raw.w << 16), __uint_as_float(raw.w & 0xffff0000u));
}

// Vector v of a token's FP8 row (16 bytes) and, for a latent vector, its
// group's scale; zeros when not live (past the split, or no cache).
struct Fp8Vector {
  uint4 raw;
  float scale;
};

__device__ __forceinline__ Fp8Vector
LoadFp8Vector(const uint8_t* row, int v, int latent_vectors,
              const kvfp8::RowLayout& layout, bool live) {
  Fp8Vector x{make_uint4(0, 0, 0, 0), 0.0f};
  if (!live) return x;
  const bool latent = v < latent_vectors;
  const int offset = latent ? v * 16 : layout.rope + (v - latent_vectors) * 16;
  x.raw = *reinterpret_cast<const uint4*>(row + offset);
  if (latent) {
    x.scale = reinterpret_cast<const float*>(
        row + layout.scales)[v * 16 / kvfp8::kGroupSize];
  }
  return x;
}

// Writes vector v's floats into the token's row in shared memory: 16
// scaled latent values or 8 rope values, or the new token's own (`fresh`,
// when not null) from this step's float buffer.
__device__ __forceinline__ void StoreFp8Vector(const Fp8Vector& x, int v,
                                               int latent_vectors, int kv_lora,
                                               const float* fresh, float* row) {
  const bool latent = v < latent_vectors;
  const int d0 = latent ? v * 16 : kv_lora + (v - latent_vectors) * 8;
  float* dst = row + d0;
  if (fresh != nullptr) {
    for (int j = 0; j < (latent ? 16 : 8); j += 4) {
      reinterpret_cast<float4*>(dst)[j / 4] =
          reinterpret_cast<const float4*>(fresh + d0)[j / 4];
    }
    return;
  }
  if (latent) {
    const uint32_t words[4] = {x.raw.x, x.raw.y, x.raw.z, x.raw.w};
    StoreScaled(words, x.scale, dst);
  } else {
    StoreBf16x8(x.raw, dst);
  }
}

__device__ void StageEntriesFp8(const SparseAttention& a, int b, int first,
                                int tokens, int* kept_s, float* entry) {
  const int dim = a.kv_lora + a.rope, row = EntryRow(dim);
  const int latent_vectors = a.kv_lora / 16,
            vectors = latent_vectors + a.rope / 8;
  const kvfp8::RowLayout layout = kvfp8::RowLayoutOf(a.kv_lora, a.rope);
  const int* kept = a.kept + static_cast<int64_t>(b) * a.k + first;
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) kept_s[t] = kept[t];
  __syncthreads();
  const uint8_t* cache =
      a.latent_fp8 + static_cast<int64_t>(b) * a.cache_stride * layout.bytes;
  const float* fresh = a.new_entry + static_cast<int64_t>(b) * dim;
  const int total = tokens * vectors, last = max(a.context - 1, 0);
  for (int base = threadIdx.x; base < total; base += kStageLoads * blockDim.x) {
    Fp8Vector loaded[kStageLoads];
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = base + u * blockDim.x;
      const int token = i < total ? min(kept_s[i / vectors], last) : 0;
      loaded[u] = LoadFp8Vector(
          cache + static_cast<int64_t>(token) * layout.bytes, i % vectors,
          latent_vectors, layout, i < total && a.context > 0);
    }
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = base + u * blockDim.x;
      if (i >= total) break;
      const int t = i / vectors;
      StoreFp8Vector(loaded[u], i % vectors, latent_vectors, a.kv_lora,
                     kept_s[t] == a.context ? fresh : nullptr, entry + t * row);
    }
  }
}

__device__ __forceinline__ float Dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

// The scores of the block's (head, token) pairs, `parts` threads a pair
// (each a strided part of the dot product, 16-byte shared loads; the parts
// meet by shuffles), scaled, into p [hg][kAttentionTokens].
__device__ void ScoreKept(const float* query, const float* entry, int dim,
                          int hg, int tokens, float scale, float* p) {
  const int row = EntryRow(dim), quads = dim / 4;
  const int parts = max(1, min(4, blockDim.x / (hg * kAttentionTokens)));
  const int rounds = (hg * kAttentionTokens * parts + blockDim.x - 1) /
                     static_cast<int>(blockDim.x);
  for (int r = 0; r < rounds; ++r) {  // uniform trip count: shuffles below
    const int i = r * blockDim.x + threadIdx.x, part = i % parts;
    const int pair = i / parts, h = pair / kAttentionTokens;
    const int t = pair % kAttentionTokens;
    float dot = 0.0f;
    if (h < hg && t < tokens) {
      const float4* qh = reinterpret_cast<const float4*>(query + h * dim);
      const float4* et = reinterpret_cast<const float4*>(entry + t * row);
#pragma unroll 4
      for (int d4 = part; d4 < quads; d4 += parts) dot += Dot4(qh[d4], et[d4]);
    }
    for (int o = 1; o < parts; o <<= 1) {
      dot += __shfl_xor_sync(0xffffffffu, dot, o);
    }
    if (part == 0 && h < hg && t < tokens) {
      p[h * kAttentionTokens + t] = dot * scale;
    }
  }
}

// Block (split x head group, sequence): stages the split's kept entries in
// shared memory once for the group's `hg` heads, scores them, and writes
// each head's partial softmax: its max, sum and weighted latent values.
template <bool kFp8>
__global__ void SparseAttentionSplitKernel(SparseAttention a, int hg) {
  EnterAfterPriorKernels();
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  const int dim = a.kv_lora + a.rope, row = EntryRow(dim);
  const int groups = a.heads / hg, b = blockIdx.y;
  const int split = blockIdx.x / groups, h0 = (blockIdx.x % groups) * hg;
  const int splits = gridDim.x / groups;
  float* query = shared;                      // [hg][dim]
  float* entry = query + hg * dim;            // [tokens][row]
  float* p = entry + kAttentionTokens * row;  // [hg][tokens]
  for (int i = threadIdx.x; i < hg * dim; i += blockDim.x) {
    const int h = h0 + i / dim, d = i % dim;
    query[i] =
        d < a.kv_lora
            ? a.q_lat[(static_cast<int64_t>(b) * a.heads + h) * a.kv_lora + d]
            : a.q[b * a.q_stride + h * a.q_head_stride + a.rope_offset + d -
                  a.kv_lora];
  }
  __shared__ int kept_s[kAttentionTokens];
  const int first = split * kAttentionTokens;
  const int tokens = max(0, min(kAttentionTokens, a.kept_n[b] - first));
  if constexpr (kFp8) {
    StageEntriesFp8(a, b, first, tokens, kept_s, entry);
  } else {
    StageEntries(a, b, first, tokens, kept_s, entry);
  }
  __syncthreads();
  ScoreKept(query, entry, dim, hg, tokens, a.scale, p);
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
  const int quads = a.kv_lora / 4;
  for (int i = threadIdx.x; i < hg * quads; i += blockDim.x) {
    const int h = i / quads, j4 = i % quads;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int t = 0; t < tokens; ++t) {
      const float w = p[h * kAttentionTokens + t];
      const float4 e = reinterpret_cast<const float4*>(entry + t * row)[j4];
      acc.x += w * e.x;
      acc.y += w * e.y;
      acc.z += w * e.z;
      acc.w += w * e.w;
    }
    float* dst =
        out +
        ((static_cast<int64_t>(b) * a.heads + h0 + h) * splits + split) *
            (a.kv_lora + 2) +
        2 + j4 * 4;
    dst[0] = acc.x;  // partial rows are kv_lora + 2 wide: 8-byte aligned
    dst[1] = acc.y;
    dst[2] = acc.z;
    dst[3] = acc.w;
  }
}

constexpr int kCombineColumns = 64;
constexpr int kCombineGroups = kAttentionThreads / kCombineColumns;

// Block (head, sequence, 64 latent columns): out_lat = sum_s e^(m_s - M)
// o_s / sum_s e^(m_s - M) l_s. Each split's weight is computed once, in
// shared memory; then 4 groups of 64 threads each sum every 4th split of
// the block's columns (a thread a column: coalesced) and meet in shared
// memory. Several blocks a head: the partials are read by the whole GPU.
__global__ void SparseAttentionCombineKernel(SparseAttention a, int splits) {
  EnterAfterPriorKernels();
  extern __shared__ float weight[];  // [splits]
  __shared__ float scratch[32];
  __shared__ float sums[kCombineGroups][kCombineColumns];
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
  const int col = threadIdx.x % kCombineColumns;
  const int group = threadIdx.x / kCombineColumns;
  const int j = blockIdx.z * kCombineColumns + col;
  float acc = 0.0f;
  if (j < a.kv_lora) {
#pragma unroll 4
    for (int s = group; s < splits; s += kCombineGroups)
      acc += weight[s] * part[s * stride + 2 + j];
  }
  sums[group][col] = acc;
  __syncthreads();
  if (group != 0 || j >= a.kv_lora) return;
  for (int g = 1; g < kCombineGroups; ++g) acc += sums[g][col];
  a.out_lat[(static_cast<int64_t>(b) * a.heads + h) * a.kv_lora + j] = acc / l;
}

// Raises the split kernel's dynamic shared memory limit once to the largest
// size asked for, not on every launch (the eager step launches it once a
// layer): one record per instance (each is a kernel of its own).
template <bool kFp8>
GpuStatus AllowSplitSharedMemory(size_t smem) {
  static std::atomic<size_t> allowed{48 * 1024};
  return AllowSharedMemory(SparseAttentionSplitKernel<kFp8>, smem, &allowed);
}

}  // namespace

namespace {

// How the split kernels cover a launch: splits of kAttentionTokens kept
// tokens, hg heads a block, the tensor-core kernel or not, and the tiles
// (splits) a block takes.
struct SplitPlan {
  int splits = 0, hg = 0, tiles = 1;
  bool mma = false;
};

SplitPlan PlanSplits(const SparseAttention& a, int sm_count) {
  SplitPlan p;
  p.splits = SparseAttentionSplits(a.k);
  p.hg = HeadsPerBlock(a.heads, p.splits * a.batch, sm_count);
  p.mma = a.latent_fp8 == nullptr && SparseAttentionMmaFits(a);
  p.tiles = p.mma ? SparseAttentionMmaTiles(a, p.hg, sm_count) : 1;
  return p;
}

}  // namespace

int SparseAttentionBlockTiles(const SparseAttention& a, int sm_count) {
  return PlanSplits(a, sm_count).tiles;
}

GpuStatus LaunchAttentionQueries(const SparseAttention& a, int sm_count,
                                 cudaStream_t stream,
                                 const LaunchPolicy& policy) {
  const SplitPlan plan = PlanSplits(a, sm_count);
  if (!plan.mma) return OkStatus();
  return LaunchMlaQueries(a, plan.hg, stream, policy);
}

GpuStatus LaunchSparseAttention(const SparseAttention& a, int sm_count,
                                cudaStream_t stream,
                                const LaunchPolicy& policy) {
  const SplitPlan plan = PlanSplits(a, sm_count);
  const int dim = a.kv_lora + a.rope, hg = plan.hg, tiles = plan.tiles;
  if (dim % 8 != 0 || a.kv_lora % 4 != 0) {
    return Fail(RunStatus::kCannotImplement,
                "sparse attention reads 16 bytes at a time: kv_lora + rope "
                "must be a multiple of 8 and kv_lora of 4, got " +
                    std::to_string(a.kv_lora) + " + " + std::to_string(a.rope));
  }
  if (a.latent_fp8 != nullptr && (a.kv_lora % 16 != 0 || a.rope % 8 != 0)) {
    return Fail(RunStatus::kCannotImplement,
                "sparse attention over the FP8 cache reads 16 values at a "
                "time: kv_lora must be a multiple of 16 and rope of 8, got " +
                    std::to_string(a.kv_lora) + " + " + std::to_string(a.rope));
  }
  const size_t smem = sizeof(float) * (static_cast<size_t>(hg) * dim +
                                       kAttentionTokens * EntryRow(dim) +
                                       hg * kAttentionTokens);
  const int parts = (plan.splits + tiles - 1) / tiles;  // partials a head
  const dim3 grid(parts * (a.heads / hg), a.batch);
  if (a.latent_fp8 != nullptr) {
    MG_RETURN_IF_ERROR(AllowSplitSharedMemory<true>(smem));
    MG_RETURN_IF_ERROR(LaunchOverlapped(SparseAttentionSplitKernel<true>, grid,
                                        kAttentionThreads, smem, stream, policy,
                                        a, hg));
  } else if (plan.mma) {
    MG_RETURN_IF_ERROR(
        LaunchSparseAttentionSplitMma(a, hg, tiles, grid, stream, policy));
  } else {
    MG_RETURN_IF_ERROR(AllowSplitSharedMemory<false>(smem));
    MG_RETURN_IF_ERROR(LaunchOverlapped(SparseAttentionSplitKernel<false>, grid,
                                        kAttentionThreads, smem, stream, policy,
                                        a, hg));
  }
  const int column_blocks = (a.kv_lora + kCombineColumns - 1) / kCombineColumns;
  return LaunchOverlapped(SparseAttentionCombineKernel,
                          dim3(a.heads, a.batch, column_blocks),
                          kAttentionThreads, parts * sizeof(float), stream,
                          policy.Then(), a, parts);
}

}  // namespace moetune::gpu
