#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <utility>

#include "kernels/backends/expert_mma/act_fp8.cuh"
#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/router.cuh"

namespace moetune::gpu {
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
// fences (PERF.md version 27).
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

// Batch 1's top-k with the whole block (PERF.md version 39): thread e ranks
// expert e's key (score + bias, then the lower index; all distinct) among
// its warp's 32 and keeps the best top_k as candidates; then the first
// 8 x top_k threads rank the candidates among themselves. The picks are
// SelectTopK's, in the same order, into sh.sel_*[0]; no serial rounds.
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
// expert's), without their block barriers and scan (PERF.md version 25).
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
  // The tail ends on a barrier: the measured router has it (PERF.md).
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

__global__ void __launch_bounds__(kThreads) RouterKernel(RouterParams p) {
  __shared__ RouterShared sh;
  // The biases of this lane's experts for the last block's top-k, loaded
  // now so that they are not on its serial tail.
  float bias[kPerLane];
  LaneBiases(p, bias);
  const float one_bias =
      threadIdx.x < p.experts ? __ldg(p.buf.bias + threadIdx.x) : 0.0f;
  uint4 wv[kMaxPerThread];
  LoadWeights(p, wv);
  // The norm's output (x), and y and the tables that the kernels before
  // may still read, only after they are done.
  WaitForPriorKernels();
  // fused_gemv's gate_up may start now: it streams the shared expert, which
  // needs nothing from here, and waits for this grid before the rest. Not
  // before the wait: its shared expert reads the norm's output before its
  // own wait (device run 87: wrong steps on fused_gemv).
  LetNextKernelStart();
  Logits(p, wv, sh);
  const bool last = IsLastBlock(p, sh, static_cast<int>(gridDim.x));
  if (!last) return;
  if (threadIdx.x == 0) *p.buf.router_counter = 0;  // ready for the next run
  if (p.batch == 1) {
    BlockSelectTopK(p, sh, one_bias);
    if (threadIdx.x >= 32) return;
    OneTokenTail(p, sh);
    return;
  }
  ManyTokenTail(p, sh, bias);
}

// Batches of kManyTokens or more: the one-kernel router above reads every
// token's input once an expert block and picks every token's top-k in one
// block (95 us at batch 128, 368 us at 512 on the H200; kernels/PERF.md,
// grouped_wgmma). Here three wide kernels: the logits on tensor cores, the
// top-k a warp a token over many blocks, then the slot tables in one block.
// Below 64 tokens these three kernels lost to one (from 16 they made the TP8
// decode step 0.6-0.9 % faster at 32 tokens but 3.3 % slower at 16; device
// runs 74, 78): FewTokenRouterKernel below serves 8-63.
constexpr int kManyTokens = 64;
constexpr int kLogitWarps = 8;  // a tile's K split eight ways
constexpr int kLogitUnroll = 4;

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

// A block a (16 tokens, 8 experts) tile of sigmoid(x W^T), each warp an
// eighth of K, four chunks' loads in flight at once (one warp a tile over
// the whole K waited on its loads: device run 35); the side work spread
// over the grid.
__global__ void __launch_bounds__(kLogitWarps * 32)
    ManyLogitsKernel(RouterParams p) {
  __shared__ float part[kLogitWarps][32][4];
  SideWork(p, blockIdx.x, gridDim.x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int e_tiles = p.experts / 8, t0 = (blockIdx.x / e_tiles) * 16;
  const int e0 = (blockIdx.x % e_tiles) * 8;
  const int ta = min(t0 + g, p.batch - 1), tb = min(t0 + g + 8, p.batch - 1);
  const uint16_t* xa = p.buf.x_bf16 + static_cast<int64_t>(ta) * p.hidden;
  const uint16_t* xb = p.buf.x_bf16 + static_cast<int64_t>(tb) * p.hidden;
  const uint16_t* wr = p.w + static_cast<int64_t>(e0 + g) * p.hidden;
  float d[4] = {};
  const int chunks = p.hidden / 64;
  for (int q0 = warp * kLogitUnroll; q0 < chunks;
       q0 += kLogitWarps * kLogitUnroll) {
    uint32_t a_lo[kLogitUnroll][8], a_hi[kLogitUnroll][8], b[kLogitUnroll][8];
#pragma unroll
    for (int u = 0; u < kLogitUnroll; ++u) {
      const int q = min(q0 + u, chunks - 1);
      LoadChunk(xa, q, c, a_lo[u]);
      LoadChunk(xb, q, c, a_hi[u]);
      LoadChunk(wr, q, c, b[u]);
    }
#pragma unroll
    for (int u = 0; u < kLogitUnroll; ++u) {
      if (q0 + u >= chunks) break;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t a[4] = {a_lo[u][2 * m], a_hi[u][2 * m],
                               a_lo[u][2 * m + 1], a_hi[u][2 * m + 1]};
        MmaBf16(d, a, b[u][2 * m], b[u][2 * m + 1]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) part[warp][lane][i] = d[i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float sum = 0.0f;
    for (int w = 0; w < kLogitWarps; ++w) sum += part[w][lane][i];
    const int t = t0 + g + (i >= 2 ? 8 : 0);
    if (t < p.batch) {
      p.buf.logits[static_cast<int64_t>(t) * p.experts + e0 + 2 * c + i % 2] =
          1.0f / (1.0f + expf(-sum));
    }
  }
}

// Every token's top-k, a warp a token (as the one-kernel router's tail).
__global__ void __launch_bounds__(kThreads) ManyTopKKernel(RouterParams p) {
  __shared__ RouterShared sh;
  float bias[kPerLane];
  LaneBiases(p, bias);
  const int t = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  if (t < p.batch) TopKToken(p, sh, t, bias);
}

// The slots and token lists from every token's picks; one block.
__global__ void __launch_bounds__(kThreads) ManySlotsKernel(RouterParams p) {
  __shared__ RouterShared sh;
  ZeroCounts(sh);
  for (int i = threadIdx.x; i < p.batch * p.top_k; i += kThreads) {
    const int e = p.buf.topk_idx[i];
    if (i < kSmemTopK) {
      sh.topk_e[i] = e;
      sh.topk_w[i] = p.buf.topk_w[i];
    }
    if (e >= p.e_lo && e < p.e_hi) atomicAdd(&sh.count[e], 1);
  }
  __syncthreads();
  BuildSlots(p, sh);
  FillPositions(p, sh);
}

// Batches of kFewTokens to kManyTokens - 1: the logits on tensor
// cores in clusters of kFewSplit blocks, a cluster a tile of 8 experts for
// every token (kM m-tiles of 16), each block a kFewSplit-th of K, its warps
// 64-K chunks in turn. The one-kernel router's blocks (one an expert) each
// read every token's input from L2 (at 32 tokens 256 x 384 KB); here each
// block reads its quarter once. The weights are loaded before the wait; a
// block's warps' sums and then the cluster's ranks' are added in a fixed
// order; rank 0 writes the scores and takes the ticket, and the last
// cluster's rank 0 picks every token's experts.
constexpr int kFewSplit = 4;
// From 8 tokens: at 2-4 the one-kernel router above stayed 0.4-0.7 % faster
// in the decode step, at 8 they tied on TP8 and this won 1 % on EP8, at 16
// and 32 it won 1-2.5 % (device run 159).
constexpr int kFewTokens = 8;
constexpr int kFewWarps = kThreads / 32;
constexpr int kFewChunks = kRouterMaxHidden / 64 / kFewSplit / kFewWarps;

template <int kM>
struct FewShared {
  RouterShared tail;
  float part[kFewWarps][kM * 128];   // a warp's accumulators, lane-major
  float ranks[kFewSplit][kM * 128];  // rank 0's: each rank's warps' sum
};

// This warp's products over its chunks of the block's K range into d[m] (m-
// tile m's tokens 16 m + g and + 8, experts e0 + 2 c and + 1); b holds its
// weights (chunk u: q_lo + warp + kFewWarps u).
template <int kM>
__device__ __forceinline__ void FewProducts(const RouterParams& p, int q_lo,
                                            int q_hi,
                                            const uint32_t (&b)[kFewChunks][8],
                                            float (&d)[kM][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const int ta = min(16 * m + g, p.batch - 1);
    const int tb = min(16 * m + g + 8, p.batch - 1);
    const uint16_t* xa = p.buf.x_bf16 + static_cast<int64_t>(ta) * p.hidden;
    const uint16_t* xb = p.buf.x_bf16 + static_cast<int64_t>(tb) * p.hidden;
#pragma unroll
    for (int u = 0; u < kFewChunks; ++u) {
      const int q = q_lo + warp + kFewWarps * u;
      if (q >= q_hi) break;
      uint32_t lo[8], hi[8];
      LoadChunk(xa, q, c, lo);
      LoadChunk(xb, q, c, hi);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t a[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1],
                               hi[2 * s + 1]};
        MmaBf16(d[m], a, b[u][2 * s], b[u][2 * s + 1]);
      }
    }
  }
}

// The cluster's sums (warps, then ranks, in order) as rank 0's scores. The
// other ranks push theirs into rank 0's shared memory and, needed no more,
// do the side work before they leave (off the tail's path).
template <int kM>
__device__ void FewClusterScores(const RouterParams& p, FewShared<kM>& sh,
                                 const float (&d)[kM][4], int rank, int e0) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sh.part[warp][m * 128 + lane * 4 + i] = d[m][i];
  }
  __syncthreads();
  cg::cluster_group cluster = cg::this_cluster();
  float* to = cluster.map_shared_rank(sh.ranks[rank], 0);
  for (int v = threadIdx.x; v < kM * 128; v += kThreads) {
    float sum = 0.0f;
    for (int w = 0; w < kFewWarps; ++w) sum += sh.part[w][v];
    to[v] = sum;
  }
  auto token = cluster.barrier_arrive();  // releases the pushed sums
  if (rank != 0) {
    SideWork(p, (kFewSplit - 1) * (blockIdx.x / kFewSplit) + rank - 1,
             (kFewSplit - 1) * (gridDim.x / kFewSplit));
    cluster.barrier_wait(std::move(token));
    return;
  }
  cluster.barrier_wait(std::move(token));  // every rank's sums are in
  for (int v = threadIdx.x; v < kM * 128; v += kThreads) {
    float sum = 0.0f;
    for (int r = 0; r < kFewSplit; ++r) sum += sh.ranks[r][v];
    const int ln = (v / 4) % 32, i = v % 4;
    const int t = 16 * (v / 128) + ln / 4 + (i >= 2 ? 8 : 0);
    const int e = e0 + 2 * (ln % 4) + i % 2;
    if (t < p.batch) {
      p.buf.logits[static_cast<int64_t>(t) * p.experts + e] =
          1.0f / (1.0f + expf(-sum));
    }
  }
}

// From 17 tokens the last cluster's four blocks pick the tokens' experts, a
// warp a token (at 32 tokens one each; in one block four a warp, one after
// another, were ~10.5 us of the router's ~17.6, device run 159); rank 0
// keeps the counts and the picks' copies in its shared memory and builds the
// tables.
template <int kM>
__device__ void ClusterTail(const RouterParams& p, FewShared<kM>& sh,
                            const float (&bias)[kPerLane], int rank,
                            int clusters) {
  cg::cluster_group cluster = cg::this_cluster();
  if (rank == 0) {
    ZeroCounts(sh.tail);  // before any rank's picks count in it
    const bool last = IsLastBlock(p, sh.tail, clusters);
    if (threadIdx.x < kFewSplit)  // each rank's own copy of the verdict
      *cluster.map_shared_rank(&sh.tail.last, threadIdx.x) = last ? 1 : 0;
  }
  cluster.sync();  // every rank knows; rank 0's counts are zero
  if (!sh.tail.last) return;
  if (rank == 0 && threadIdx.x == 0) *p.buf.router_counter = 0;
  RouterShared& tables = *cluster.map_shared_rank(&sh.tail, 0);
  const int warp = threadIdx.x / 32;
  for (int t = rank * kFewWarps + warp; t < p.batch;
       t += kFewSplit * kFewWarps) {
    SelectTopK(p, sh.tail, t, bias);
    FinishTopKInto(p, sh.tail, tables, t, warp);
  }
  cluster.sync();  // every rank's picks are in rank 0's tables
  if (rank == 0) SlotsTail(p, sh.tail);
}

template <int kM>
__global__ void __launch_bounds__(kThreads)
    FewTokenRouterKernel(RouterParams p) {
  __shared__ FewShared<kM> sh;
  float bias[kPerLane];
  LaneBiases(p, bias);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rank = static_cast<int>(blockIdx.x) % kFewSplit;
  const int e0 = static_cast<int>(blockIdx.x) / kFewSplit * 8;
  const int chunks = p.hidden / 64;
  const int q_lo = rank * chunks / kFewSplit;
  const int q_hi = (rank + 1) * chunks / kFewSplit;
  const uint16_t* wr = p.w + static_cast<int64_t>(e0 + lane / 4) * p.hidden;
  uint32_t b[kFewChunks][8];
#pragma unroll
  for (int u = 0; u < kFewChunks; ++u) {
    const int q = q_lo + warp + kFewWarps * u;
    if (q < q_hi) LoadChunk(wr, q, lane % 4, b[u]);
  }
  WaitForPriorKernels();  // as RouterKernel
  LetNextKernelStart();
  float d[kM][4] = {};
  FewProducts<kM>(p, q_lo, q_hi, b, d);
  FewClusterScores<kM>(p, sh, d, rank, e0);
  // Rank 0s take the tickets.
  const int clusters = static_cast<int>(gridDim.x) / kFewSplit;
  if constexpr (kM > 1) {
    ClusterTail<kM>(p, sh, bias, rank, clusters);
  } else if (rank == 0 && IsLastBlock(p, sh.tail, clusters)) {
    if (threadIdx.x == 0) *p.buf.router_counter = 0;
    FewTokenTail<2>(p, sh.tail, bias);
  }
}

template <int kM>
GpuStatus LaunchFewTokenRouter(const RouterParams& p, cudaStream_t stream) {
  return LaunchOverlappedInClusters(FewTokenRouterKernel<kM>,
                                    p.experts / 8 * kFewSplit, kThreads, 0,
                                    stream, kFewSplit, p);
}

GpuStatus LaunchManyTokenRouter(const RouterParams& p, cudaStream_t stream) {
  // A block a (16 tokens, 8 experts) tile.
  const int tiles = (p.batch + 15) / 16 * (p.experts / 8);
  ManyLogitsKernel<<<tiles, kLogitWarps * 32, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  const int per_block = kThreads / 32;
  ManyTopKKernel<<<(p.batch + per_block - 1) / per_block, kThreads, 0,
                   stream>>>(p);
  MG_CHECK_LAUNCH();
  ManySlotsKernel<<<1, kThreads, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace

GpuStatus LaunchRouter(const LayerArgs& args, cudaStream_t stream) {
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
  const bool tiles = g.experts % 8 == 0 && g.hidden % 64 == 0;
  if (tiles && g.batch >= kManyTokens) return LaunchManyTokenRouter(p, stream);
  if (tiles && g.batch >= kFewTokens) {
    switch ((g.batch + 15) / 16) {
      case 1:
        return LaunchFewTokenRouter<1>(p, stream);
      case 2:
        return LaunchFewTokenRouter<2>(p, stream);
      case 3:
        return LaunchFewTokenRouter<3>(p, stream);
      default:
        return LaunchFewTokenRouter<4>(p, stream);
    }
  }
  return LaunchOverlapped(RouterKernel, g.experts, kThreads, 0, stream, p);
}

}  // namespace moetune::gpu
