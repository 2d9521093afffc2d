// The routers' shared parts: the parameters, the block's shared memory, the
// logits' loads and tensor-core steps, the top-k selection, the slot tables
// and the last block's tails. Included only by the three routers
// (router_one_kernel.cu, router_few_tokens.cu, router_many_tokens.cu): its
// functions keep internal linkage (an unnamed namespace) in each, so each
// router's device code compiles on its own as one unit. Launch-only; not
// thread-safe.
#pragma once

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <utility>

#include "kernels/cuda/base/act_fp8.cuh"
#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/moe/router.cuh"

namespace moetune::gpu {

// The three routers, each for a range of batches (router.cu LaunchRouter
// picks one): one kernel, its last block picking every token's experts;
// from 8 tokens the logits on tensor cores in clusters; from 64 tokens three
// wide kernels.
GpuStatus LaunchOneKernelRouter(const LayerArgs& args, cudaStream_t stream);
GpuStatus LaunchFewTokenRouter(const LayerArgs& args, cudaStream_t stream);
GpuStatus LaunchManyTokenRouter(const LayerArgs& args, cudaStream_t stream);

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kTokGroup = 8;
constexpr int kPerLane = kRouterMaxExperts / 32;

struct RouterParams {
  const uint16_t* w;
  int batch, hidden, experts, top_k;
  float scaling;
  int e_lo, e_hi, has_shared, shared_index;
  int write_x_fp8;
  RunBuffers buf;
};

constexpr int kSmemTopK = 1024;  // batch * top_k kept in shared memory

struct RouterShared {
  float red[kThreads / 32][kTokGroup];
  int count[kRouterMaxExperts];
  int fill[kRouterMaxExperts];
  int off_of[kRouterMaxExperts];
  ulonglong2 scan[kThreads / 32];
  int sel_e[kThreads / 32][kRouterMaxTopK];
  float sel_s[kThreads / 32][kRouterMaxTopK];
  union {
    struct {  // tokens' picks, batch > 1
      int topk_e[kSmemTopK];
      float topk_w[kSmemTopK];
    };
    struct alignas(16) {  // one token's ranking (BlockSelectTopK)
      unsigned long long key[kRouterMaxExperts];
      unsigned long long cand[8 * kRouterMaxTopK];
      float score[kRouterMaxExperts];
    } one;
  };
  int last;
};

__device__ float Dot8(uint4 w, uint4 x) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
  const uint32_t xv[4] = {x.x, x.y, x.z, x.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s = fmaf(__uint_as_float(wv[i] << 16), __uint_as_float(xv[i] << 16), s);
    s = fmaf(__uint_as_float(wv[i] & 0xffff0000u),
             __uint_as_float(xv[i] & 0xffff0000u), s);
  }
  return s;
}

// Eight BF16 values as eight fp16 ones.
__device__ __forceinline__ uint4 HalvesOf(uint4 v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 pair = __floats2half2_rn(__uint_as_float(w[i] << 16),
                                           __uint_as_float(w[i] & 0xffff0000u));
    h[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return make_uint4(h[0], h[1], h[2], h[3]);
}

// The zeroed output and x as the expert kernels read it -- an fp16 copy, or
// for fused_gemv_fp8 (which reads no fp16 x) its FP8 hi + lo blocks (one
// thread a block of 16) -- spread over `parts` blocks, this block part
// `part`. Eight values a thread at a time, four such loads issued before
// their stores (a load a value behind the store before it waited one L2
// trip each: 6 a thread at 32 tokens).
constexpr int kSideInFlight = 4;

__device__ void SideWork(const RouterParams& p, int part, int parts) {
  const int64_t n = static_cast<int64_t>(p.batch) * p.hidden;
  const int64_t stride = static_cast<int64_t>(parts) * blockDim.x;
  const int64_t first = static_cast<int64_t>(part) * blockDim.x + threadIdx.x;
  const uint4* x = reinterpret_cast<const uint4*>(p.buf.x_bf16);
  float4* y = reinterpret_cast<float4*>(p.buf.y);
  uint4* x16 = reinterpret_cast<uint4*>(p.buf.x16);
  for (int64_t v0 = first; v0 < n / 8; v0 += kSideInFlight * stride) {
    uint4 v[kSideInFlight];
#pragma unroll
    for (int u = 0; u < kSideInFlight; ++u) {
      const int64_t i = v0 + u * stride;
      if (i < n / 8 && !p.write_x_fp8) v[u] = x[i];
    }
#pragma unroll
    for (int u = 0; u < kSideInFlight; ++u) {
      const int64_t i = v0 + u * stride;
      if (i >= n / 8) break;
      y[2 * i] = y[2 * i + 1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (!p.write_x_fp8) x16[i] = HalvesOf(v[u]);
    }
  }
  if (part == 0 && threadIdx.x < n % 8) {  // a hidden not a multiple of 8
    const int64_t i = n - n % 8 + threadIdx.x;
    p.buf.y[i] = 0.0f;
    const uint32_t bits = static_cast<uint32_t>(p.buf.x_bf16[i]) << 16;
    if (!p.write_x_fp8) p.buf.x16[i] = __float2half_rn(__uint_as_float(bits));
  }
  if (!p.write_x_fp8) return;
  const int blocks = p.hidden / act_fp8::kBlock;
  for (int64_t b = first; b < n / act_fp8::kBlock; b += stride) {
    const int64_t t = b / blocks;
    act_fp8::SplitBf16Block(
        p.buf.x_bf16 + b * act_fp8::kBlock, static_cast<int>(b % blocks),
        p.buf.x_fp8 + t * p.hidden * act_fp8::kBytesPerValue,
        p.buf.x_fp8_inv + b);
  }
}

// Logits of expert blockIdx.x for every token, 8 tokens per pass. Each
// thread's weight vectors (kMaxPerThread x 16 bytes) are loaded by
// LoadWeights before the wait for the kernels before (no kernel writes
// them: under an overlapped launch they arrive while the norm before still
// runs), token 0's input after it (batch 1's only token: no load after
// SideWork).
constexpr int kMaxPerThread = kRouterMaxHidden / kThreads / 8;

__device__ __forceinline__ void LoadWeights(const RouterParams& p,
                                            uint4 (&wv)[kMaxPerThread]) {
  const int vecs = p.hidden / 8;
  const uint4* wrow = reinterpret_cast<const uint4*>(
      p.w + static_cast<int64_t>(blockIdx.x) * p.hidden);
#pragma unroll
  for (int r = 0; r < kMaxPerThread; ++r) {
    const int q = threadIdx.x + r * kThreads;
    wv[r] = q < vecs ? __ldg(wrow + q) : make_uint4(0, 0, 0, 0);
  }
}

__device__ void Logits(const RouterParams& p, const uint4 (&wv)[kMaxPerThread],
                       RouterShared& sh) {
  const int e = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int vecs = p.hidden / 8;
  const uint4* x0row = reinterpret_cast<const uint4*>(p.buf.x_bf16);
  uint4 x0[kMaxPerThread];
#pragma unroll
  for (int r = 0; r < kMaxPerThread; ++r) {
    const int q = threadIdx.x + r * kThreads;
    x0[r] = q < vecs ? __ldg(x0row + q) : make_uint4(0, 0, 0, 0);
  }
  SideWork(p, blockIdx.x, gridDim.x);  // while the input arrives
  for (int t0 = 0; t0 < p.batch; t0 += kTokGroup) {
    float part[kTokGroup] = {};
#pragma unroll
    for (int t = 0; t < kTokGroup; ++t) {
      if (t0 + t >= p.batch) break;
      const uint4* xrow = reinterpret_cast<const uint4*>(
          p.buf.x_bf16 + static_cast<int64_t>(t0 + t) * p.hidden);
#pragma unroll
      for (int r = 0; r < kMaxPerThread; ++r) {
        const int q = threadIdx.x + r * kThreads;
        if (q < vecs)
          part[t] += Dot8(wv[r], t0 + t == 0 ? x0[r] : __ldg(xrow + q));
      }
    }
#pragma unroll
    for (int t = 0; t < kTokGroup; ++t) {
      for (int off = 16; off > 0; off >>= 1)
        part[t] += __shfl_xor_sync(~0u, part[t], off);
      if (lane == 0) sh.red[warp][t] = part[t];
    }
    __syncthreads();
    const int t = threadIdx.x;
    if (t < kTokGroup && t0 + t < p.batch) {
      float sum = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) sum += sh.red[w][t];
      // The sigmoid score, computed here in every block rather than in the
      // last block's serial tail.
      p.buf.logits[static_cast<int64_t>(t0 + t) * p.experts + e] =
          1.0f / (1.0f + expf(-sum));
    }
    __syncthreads();
  }
}

// The block that finishes last of the `blocks` that take a ticket sees every
// score (threadfence-reduction).
// Thread 0's ticket releases the block's writes (ordered before it by the
// barrier) and acquires those of the blocks before; the barrier after it
// orders the last block's reads after that acquire. One atomic, no separate
// fences.
__device__ bool IsLastBlock(const RouterParams& p, RouterShared& sh,
                            int blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const int ticket = AtomicAddAcqRelGpu(p.buf.router_counter, 1);
    sh.last = ticket == blocks - 1;
  }
  __syncthreads();
  return sh.last != 0;
}

// Floats as unsigned keys with the same order (larger float, larger key).
__device__ uint32_t OrderedKey(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ void FinishTopK(const RouterParams& p, RouterShared& sh, int t,
                           int slot);

// Token t's keys (score + bias as ordered bits; 0, below every finite score,
// past the experts) and scores of this lane's experts (lane + 32 i).
__device__ __forceinline__ void LoadKeys(const RouterParams& p, int t,
                                         const float (&bias)[kPerLane],
                                         uint32_t (&key)[kPerLane],
                                         float (&sig)[kPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    key[i] = 0;
    sig[i] = 0.0f;
    if (e < p.experts) {
      sig[i] = __ldcg(p.buf.logits + static_cast<int64_t>(t) * p.experts + e);
      key[i] = OrderedKey(sig[i] + bias[i]);
    }
  }
}

// One warp picks a token's top-k from its keys (score desc, expert index
// asc) into sh.sel_*[warp] (sel_e[warp][r] = the r-th pick): per round a
// max-reduction of the keys, then a min-reduction of the indices holding it.
__device__ void SelectFrom(const RouterParams& p, RouterShared& sh,
                           const uint32_t (&key)[kPerLane],
                           const float (&sig)[kPerLane]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t taken = 0;
  for (int r = 0; r < p.top_k; ++r) {
    uint32_t best = 0;
    int bi = -1;
    float bs = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (!((taken >> i) & 1u) && key[i] > best) {
        best = key[i];
        bi = i;
        bs = sig[i];
      }
    }
    const uint32_t top = __reduce_max_sync(~0u, best);
    const uint32_t cand =
        (bi >= 0 && best == top) ? static_cast<uint32_t>(lane + 32 * bi) : ~0u;
    const uint32_t e = __reduce_min_sync(~0u, cand);
    if ((e & 31u) == static_cast<uint32_t>(lane)) {
      taken |= 1u << (e >> 5);
      sh.sel_e[warp][r] = static_cast<int>(e);
      sh.sel_s[warp][r] = bs;
    }
  }
  __syncwarp();
}

__device__ void SelectTopK(const RouterParams& p, RouterShared& sh, int t,
                           const float (&bias)[kPerLane]) {
  uint32_t key[kPerLane];
  float sig[kPerLane];
  LoadKeys(p, t, bias, key, sig);
  SelectFrom(p, sh, key, sig);
}

// Batch 1's top-k with the whole block: thread e ranks expert e's key
// (score + bias, then the lower index; all distinct) among its warp's 32 and
// keeps the best top_k as candidates; then the first 8 x top_k threads rank
// the candidates among themselves. The picks are SelectTopK's, in the same
// order, into sh.sel_*[0]; no serial rounds.
__device__ void BlockSelectTopK(const RouterParams& p, RouterShared& sh,
                                float bias) {
  static_assert(kThreads == kRouterMaxExperts, "a thread an expert");
  const int e = threadIdx.x, warp = threadIdx.x / 32;
  float score = 0.0f;
  uint32_t key = 0;
  if (e < p.experts) {
    score = __ldcg(p.buf.logits + e);
    key = OrderedKey(score + bias);
  }
  const unsigned long long mine =
      (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - e);
  sh.one.key[e] = mine;
  sh.one.score[e] = score;
  __syncwarp();
  const ulonglong2* peers =
      reinterpret_cast<const ulonglong2*>(sh.one.key + warp * 32);
  int rank = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const ulonglong2 v = peers[j];
    rank += (v.x > mine ? 1 : 0) + (v.y > mine ? 1 : 0);
  }
  if (rank < p.top_k) sh.one.cand[warp * p.top_k + rank] = mine;
  __syncthreads();
  const int n = (kThreads / 32) * p.top_k;
  if (e < n) {
    const unsigned long long c = sh.one.cand[e];
    const ulonglong2* all = reinterpret_cast<const ulonglong2*>(sh.one.cand);
    int r = 0;
    for (int j = 0; j < n / 2; ++j) {  // n = 8 x top_k: even
      const ulonglong2 v = all[j];
      r += (v.x > c ? 1 : 0) + (v.y > c ? 1 : 0);
    }
    if (r < p.top_k) {
      const int picked = static_cast<int>(0xffffffffu - (c & 0xffffffffu));
      sh.sel_e[0][r] = picked;
      sh.sel_s[0][r] = sh.one.score[picked];
    }
  }
  __syncthreads();
}

__device__ void TopKToken(const RouterParams& p, RouterShared& sh, int t,
                          const float (&bias)[kPerLane]) {
  SelectTopK(p, sh, t, bias);
  FinishTopK(p, sh, t, threadIdx.x / 32);
}

// Normalises the selection picks.sel_*[slot] of token t (score / sum *
// scaling) and writes it out, its counts and shared copies into `tables`
// (another block's of the cluster, possibly); one warp.
__device__ void FinishTopKInto(const RouterParams& p, const RouterShared& picks,
                               RouterShared& tables, int t, int slot) {
  const int lane = threadIdx.x % 32;
  float sum = 0.0f;
  for (int r = 0; r < p.top_k; ++r) sum += picks.sel_s[slot][r];
  if (lane < p.top_k) {
    const int e = picks.sel_e[slot][lane];
    const float w = picks.sel_s[slot][lane] / sum * p.scaling;
    const int64_t i = static_cast<int64_t>(t) * p.top_k + lane;
    p.buf.topk_idx[i] = e;
    p.buf.topk_w[i] = w;
    if (i < kSmemTopK) {
      tables.topk_e[i] = e;
      tables.topk_w[i] = w;
    }
    if (e >= p.e_lo && e < p.e_hi) atomicAdd(&tables.count[e], 1);
  }
  __syncwarp();
}

// The same within one block.
__device__ void FinishTopK(const RouterParams& p, RouterShared& sh, int t,
                           int slot) {
  FinishTopKInto(p, sh, sh, t, slot);
}

// Exclusive scan over the block (256 threads) of two 64-bit values, each
// holding three packed counters (one pass, one pair of barriers); *total
// gets the sums.
__device__ ulonglong2 BlockExclusiveScan(ulonglong2 v, RouterShared& sh,
                                         ulonglong2* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  ulonglong2 inc = v;
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long ox = __shfl_up_sync(~0u, inc.x, off);
    const unsigned long long oy = __shfl_up_sync(~0u, inc.y, off);
    if (lane >= off) {
      inc.x += ox;
      inc.y += oy;
    }
  }
  if (lane == 31) sh.scan[warp] = inc;
  __syncthreads();
  ulonglong2 base{0, 0}, sum{0, 0};
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) {
      base.x += sh.scan[w].x;
      base.y += sh.scan[w].y;
    }
    sum.x += sh.scan[w].x;
    sum.y += sh.scan[w].y;
  }
  __syncthreads();
  *total = sum;
  return ulonglong2{base.x + inc.x - v.x, base.y + inc.y - v.y};
}

// Packing of (slot flag, token count, 64-token tiles) into one scan value.
constexpr int kCountShift = 16, kTileShift = 40;

// The shared expert's 64-token tiles (all the batch's tokens; 0 without it).
__device__ int SharedTiles(const RouterParams& p) {
  return p.has_shared * ((p.batch + kGroupedTokens - 1) / kGroupedTokens);
}

// layer.cuh's tile_info entries of a slot of `tokens` tokens from position
// `first` (one a 64-token tile from tile `tile`).
__device__ void WriteTiles(const RouterParams& p, int tile, int first,
                           int tokens, int local_expert) {
  for (int t = 0; t * kGroupedTokens < tokens; ++t) {
    const int n = min(kGroupedTokens, tokens - t * kGroupedTokens);
    p.buf.tile_info[tile + t] =
        make_int2(first + t * kGroupedTokens, local_expert | (n << 16));
  }
}

// One thread: the shared expert's slot 0 and the tables' counts, from the
// routed slots', positions' and tiles' totals and the wide routed slots'
// count.
__device__ void WriteSharedSlotAndCounts(const RouterParams& p, int routed,
                                         int positions, int tiles,
                                         int wide_routed) {
  if (p.has_shared) {
    p.buf.slot_expert[0] = p.shared_index;
    p.buf.slot_tok_off[0] = 0;
    p.buf.slot_ntok[0] = p.batch;
    p.buf.tile_prefix[0] = 0;
    WriteTiles(p, 0, 0, p.batch, p.shared_index);
  }
  const int slots = routed + p.has_shared;
  p.buf.tile_prefix[slots] = SharedTiles(p) + tiles;
  p.buf.meta[kMetaSlots] = slots;
  p.buf.meta[kMetaRouted] = routed;
  p.buf.meta[kMetaPositions] = positions + p.has_shared * p.batch;
  p.buf.meta[kMetaTiles] = SharedTiles(p) + tiles;
  p.buf.meta[kMetaWide] =
      p.batch > kWideSplitBatch ? p.has_shared + wide_routed : 0;
}

// (slots, positions, tiles) packed as a scan value and back.
__device__ unsigned long long PackSlot(int c) {
  return static_cast<unsigned long long>(c > 0 ? 1 : 0) |
         (static_cast<unsigned long long>(c) << kCountShift) |
         (static_cast<unsigned long long>((c + kGroupedTokens - 1) /
                                          kGroupedTokens)
          << kTileShift);
}
__device__ int SlotsOf(unsigned long long v) {
  return static_cast<int>(v & 0xffffu);
}
__device__ int PositionsOf(unsigned long long v) {
  return static_cast<int>((v >> kCountShift) & 0xffffffu);
}
__device__ int TilesOfPacked(unsigned long long v) {
  return static_cast<int>(v >> kTileShift);
}

// Slots: the shared expert first (slot 0, positions [0, batch): known before
// the routing, so fused_gemv streams it while this kernel runs), then above
// kWideSplitBatch tokens the owned experts of more than kWideTokens tokens,
// ascending, then the other owned experts with tokens, ascending (below,
// all of them ascending); positions and tiles in slot order.
__device__ void BuildSlots(const RouterParams& p, RouterShared& sh) {
  const int e = threadIdx.x;
  const bool owned = e < p.experts && e >= p.e_lo && e < p.e_hi;
  const int c = owned ? sh.count[e] : 0;
  const bool wide = p.batch > kWideSplitBatch && c > kWideTokens;
  ulonglong2 total;  // x: the wide slots, y: the others
  const ulonglong2 ex = BlockExclusiveScan(
      ulonglong2{wide ? PackSlot(c) : 0ull, wide ? 0ull : PackSlot(c)}, sh,
      &total);
  const unsigned long long before = wide ? ex.x : total.x + ex.y;
  const int n_slots = SlotsOf(total.x) + SlotsOf(total.y);
  const int n_pos = PositionsOf(total.x) + PositionsOf(total.y);
  const int n_tiles = TilesOfPacked(total.x) + TilesOfPacked(total.y);
  const int slot = p.has_shared + SlotsOf(before);
  const int off = p.has_shared * p.batch + PositionsOf(before);
  const int tiles = SharedTiles(p) + TilesOfPacked(before);
  if (c > 0) {
    p.buf.slot_expert[slot] = e - p.e_lo;
    p.buf.slot_tok_off[slot] = off;
    p.buf.slot_ntok[slot] = c;
    p.buf.tile_prefix[slot] = tiles;
    WriteTiles(p, tiles, off, c, e - p.e_lo);
  }
  sh.off_of[e] = off;
  sh.fill[e] = 0;
  if (threadIdx.x == 0) {
    WriteSharedSlotAndCounts(p, n_slots, n_pos, n_tiles, SlotsOf(total.x));
  }
  __syncthreads();
}

// Token lists per slot (order inside a slot is the atomics' order).
__device__ void FillPositions(const RouterParams& p, RouterShared& sh) {
  const int k = p.top_k;
  for (int i = threadIdx.x; i < p.batch * k; i += kThreads) {
    const int t = i / k, r = i % k;
    const int e = i < kSmemTopK ? sh.topk_e[i] : p.buf.topk_idx[i];
    int pos = -1;
    if (e >= p.e_lo && e < p.e_hi) {
      pos = sh.off_of[e] + atomicAdd(&sh.fill[e], 1);
      p.buf.tok_list[pos] = t;
      p.buf.tok_w[pos] = i < kSmemTopK ? sh.topk_w[i] : p.buf.topk_w[i];
    }
    p.buf.tok_pos[static_cast<int64_t>(t) * (k + 1) + r] = pos;
  }
  for (int t = threadIdx.x; t < p.batch; t += kThreads) {
    const int pos = p.has_shared ? t : -1;
    p.buf.tok_pos[static_cast<int64_t>(t) * (k + 1) + k] = pos;
    if (pos >= 0) {
      p.buf.tok_list[pos] = t;
      p.buf.tok_w[pos] = 1.0f;
    }
  }
}

// The shared expert's slot and position and the counts of a one-token
// routing with n_owned routed slots (one position and tile each): what
// BuildSlots and FillPositions write for batch 1.
__device__ void OneTokenMeta(const RouterParams& p, int n_owned) {
  WriteSharedSlotAndCounts(p, n_owned, n_owned, n_owned, 0);
  if (p.has_shared) {
    p.buf.tok_list[0] = 0;
    p.buf.tok_w[0] = 1.0f;
  }
  p.buf.tok_pos[p.top_k] = p.has_shared ? 0 : -1;
}

// Batch 1, a decode step's one token, after BlockSelectTopK: warp 0 writes
// the same tables as FinishTopK, BuildSlots and FillPositions (one slot,
// position and tile per owned pick, in expert order after the shared
// expert's), without their block barriers and scan.
// Lane r < top_k: pick r.
__device__ void OneTokenTail(const RouterParams& p, RouterShared& sh) {
  const int lane = threadIdx.x;
  const bool mine = lane < p.top_k;
  const int e = mine ? sh.sel_e[0][lane] : INT_MAX;
  const bool owned = mine && e >= p.e_lo && e < p.e_hi;
  float sum = 0.0f;  // in pick order, as FinishTopK sums
  int rank = 0;      // owned picks with a lower expert index
  for (int r = 0; r < p.top_k; ++r) {
    sum += sh.sel_s[0][r];
    const int er = sh.sel_e[0][r];
    rank += (er >= p.e_lo && er < p.e_hi && er < e) ? 1 : 0;
  }
  const int n_owned = __popc(__ballot_sync(~0u, owned));
  if (mine) {
    const float w = sh.sel_s[0][lane] / sum * p.scaling;
    const int pos = p.has_shared + rank;  // its slot, position and tile
    p.buf.topk_idx[lane] = e;
    p.buf.topk_w[lane] = w;
    p.buf.tok_pos[lane] = owned ? pos : -1;
    if (owned) {
      p.buf.slot_expert[pos] = e - p.e_lo;
      p.buf.slot_tok_off[pos] = pos;
      p.buf.slot_ntok[pos] = 1;
      p.buf.tile_prefix[pos] = pos;
      p.buf.tile_info[pos] = make_int2(pos, (e - p.e_lo) | (1 << 16));
      p.buf.tok_list[pos] = 0;
      p.buf.tok_w[pos] = w;
    }
  }
  if (lane == 0) OneTokenMeta(p, n_owned);
}

__device__ void ZeroCounts(RouterShared& sh) {
  for (int e = threadIdx.x; e < kRouterMaxExperts; e += kThreads)
    sh.count[e] = 0;
  __syncthreads();
}

// After every token's picks (FinishTopK): the slots and the token lists.
__device__ void SlotsTail(const RouterParams& p, RouterShared& sh) {
  __syncthreads();
  BuildSlots(p, sh);
  FillPositions(p, sh);
  // The tail ends on a barrier, as in the router that
  // kernels/cuda/moe/PERF.md measures.
  __syncthreads();
}

// Batches > 1, in the last block: every token's top-k (a warp a token), the
// slots and the token lists.
__device__ void ManyTokenTail(const RouterParams& p, RouterShared& sh,
                              const float (&bias)[kPerLane]) {
  ZeroCounts(sh);
  for (int t = threadIdx.x / 32; t < p.batch; t += kThreads / 32)
    TopKToken(p, sh, t, bias);
  SlotsTail(p, sh);
}

// As ManyTokenTail for batches of at most 8 x kTokensAWarp: a warp's tokens'
// keys all loaded before its first selection (one trip to L2 for them all,
// not one a token; the same picks in the same order).
template <int kTokensAWarp>
__device__ void FewTokenTail(const RouterParams& p, RouterShared& sh,
                             const float (&bias)[kPerLane]) {
  ZeroCounts(sh);
  const int warp = threadIdx.x / 32;
  uint32_t key[kTokensAWarp][kPerLane];
  float sig[kTokensAWarp][kPerLane];
#pragma unroll
  for (int j = 0; j < kTokensAWarp; ++j)
    LoadKeys(p, min(warp + kThreads / 32 * j, p.batch - 1), bias, key[j],
             sig[j]);
#pragma unroll
  for (int j = 0; j < kTokensAWarp; ++j) {
    const int t = warp + kThreads / 32 * j;
    if (t >= p.batch) break;
    SelectFrom(p, sh, key[j], sig[j]);
    FinishTopK(p, sh, t, warp);
  }
  SlotsTail(p, sh);
}

// The biases of this lane's experts (lane + 32 i), as SelectTopK reads them.
__device__ __forceinline__ void LaneBiases(const RouterParams& p,
                                           float (&bias)[kPerLane]) {
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = threadIdx.x % 32 + 32 * i;
    bias[i] = e < p.experts ? __ldg(p.buf.bias + e) : 0.0f;
  }
}

__device__ __forceinline__ void MmaBf16(float (&d)[4], const uint32_t (&a)[4],
                                        uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The 16 BF16 values a lane owns of a 64-K chunk (K 16 c .. 16 c + 15) as 8
// words: mma step m reads words 2 m and 2 m + 1, its logical k 2 c + {0, 1}
// and 8 + 2 c + {0, 1} (the K order of tiled_nvfp4.h; a dot product does
// not depend on it, as long as A and B agree).
__device__ __forceinline__ void LoadChunk(const uint16_t* row, int q, int c,
                                          uint32_t (&w)[8]) {
  const uint4* v = reinterpret_cast<const uint4*>(row + q * 64 + 16 * c);
  const uint4 lo = __ldg(v), hi = __ldg(v + 1);
  w[0] = lo.x, w[1] = lo.y, w[2] = lo.z, w[3] = lo.w;
  w[4] = hi.x, w[5] = hi.y, w[6] = hi.z, w[7] = hi.w;
}

// The router's parameters from the layer's.
RouterParams ParamsOf(const LayerArgs& args) {
  const Geometry& g = args.geo;
  RouterParams p{};
  p.w = args.router_w;
  p.batch = g.batch;
  p.hidden = g.hidden;
  p.experts = g.experts;
  p.top_k = g.top_k;
  p.scaling = g.scaling;
  p.e_lo = g.e_lo;
  p.e_hi = g.e_hi;
  p.has_shared = g.has_shared;
  p.shared_index = g.num_local;
  p.write_x_fp8 = args.router_writes_x_fp8 ? 1 : 0;
  p.buf = args.buf;
  return p;
}

}  // namespace
}  // namespace moetune::gpu
