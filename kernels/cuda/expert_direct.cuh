// The bulk-copy expert kernel behind fused_gemv's block_k = 64 tiles
// (version 8, PERF.md). Each warp streams its weights through a private ring
// of shared-memory slots filled by TMA bulk copies (cp.async.bulk: one
// instruction from one lane moves up to 8 chunks of a row tile, 4 KB, plus
// their scale records, with an mbarrier), so the SM keeps far more bytes in
// flight than registers could hold, at almost no instruction cost. The lanes
// decode their 16 code bytes of a chunk to fp16 (E2M1 * 2^-14) and multiply
// them WITHOUT the block scale: the block scale is applied after the mma, to
// its fp32 result.
//
// Why that works: a lane's 16 bytes of a chunk are one NVFP4 block per row
// (tiled_nvfp4.h: lane c holds block c of rows g and g + 8), so a chunk's
// mma sums four blocks. Decode batches have few tokens per expert, and the
// mma has 8 columns: column n carries token 2 * pair + n / 4 restricted to
// block n % 4 (lane (g, c) loads its activations only when g % 4 == c,
// zeros otherwise). Column n of the result is then one block's unscaled
// partial dot product, and each lane scales its two columns by their block
// scales with two FFMAs per row: per chunk ~10 instructions instead of 16
// HMUL2 before the mma. Tokens come in pairs (one mma chain per pair);
// slots with more than 2 * kPairs tokens re-stream their run per group.
//
// Schedule: stream-K over (slot, row group of kRT tiles, 4-chunk scale group)
// units of all active experts, each warp a contiguous range (or rounds of
// kRoundUnits when a phase is large, for DRAM locality), so every run starts
// on a scale group and a slot's scale offsets are constants; its slots are
// copied kSlots ahead
// across run boundaries. Partial gate_up row groups are added with fp32
// atomics and a per-row-group counter; the warp that completes one applies
// SiLU(gate) * up. Down adds w * out into y with atomics. gate_up streams
// the shared expert before waiting for the router (programmatic dependent
// launch); down copies its first weights before waiting for gate_up.
// Included only by fused_gemv.cu. Launch-only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/expert_mma.cuh"

namespace moetune::gpu {
namespace direct_detail {

using mma_detail::AtomicAddAcqRelGpu;
using mma_detail::GridDependencyWait;
using mma_detail::LaunchDependents;
using mma_detail::Mma;
using mma_detail::WarpRange;

inline constexpr int kWarps = 8;
inline constexpr int kRoundUnits = 12;  // per warp and round, large phases

// One ring slot: 8 chunks (4 for 32-row tiles: whole scale groups) of each
// row tile's codes and scale records and, for passes of <= 2 tokens
// (kPairs == 1), the tokens' activations of those chunks; lanes without
// activations read a zeroed area instead. Two slots a warp: 16 warps an SM
// fill its shared memory.
template <int kRT, int kPairs>
struct SlotShape {
  static constexpr bool kSmemX = kPairs == 1;
  static constexpr int kChunks = kRT == 1 ? 8 : 4;
  static constexpr int kSlots = 2;
  static constexpr int kCodeBytes = kChunks * tiled::kChunkBytes;
  static constexpr int kScaleSpan =
      kChunks / tiled::kGroupChunks * tiled::kScaleGroupBytes;
  static constexpr int kXRowBytes = kChunks * tiled::kChunkK * 2;  // fp16
  static constexpr int kXOffset = kRT * (kCodeBytes + kScaleSpan);
  static constexpr int kBytes = kXOffset + (kSmemX ? 2 * kXRowBytes : 0);
  static constexpr int kZeroBytes = kSmemX ? kXRowBytes : 0;
  // Rounded to 16 bytes: every warp's slots stay aligned for TMA.
  static constexpr int kWarpBytes =
      (kSlots * kBytes + kZeroBytes + kSlots * 8 + 15) / 16 * 16;
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(SmemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
          SmemAddr(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(SmemAddr(bar)),
      "r"(phase)
      : "memory");
}
// One TMA bulk copy global -> shared, completing on `bar`.
__device__ __forceinline__ void BulkCopy(void* dst, const void* src,
                                         uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];\n" ::"r"(SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

// E4M3 pair (row g, row g + 8) -> two floats.
__device__ __forceinline__ float2 ScalesOf(uint32_t bytes) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n"
      : "=r"(h2)
      : "h"(static_cast<uint16_t>(bytes)));
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}

// Two BF16 (one word) -> two fp16 (exact inside fp16's range).
__device__ __forceinline__ uint32_t Bf16x2ToHalf2(uint32_t v) {
  uint32_t out;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n"
      : "=r"(out)
      : "f"(__uint_as_float(v & 0xffff0000u)), "f"(__uint_as_float(v << 16)));
  return out;
}

// A run: one slot's row group over chunks [kc0, kc0 + n).
struct RunInfo {
  int s = 0, rg = 0, kc0 = 0, n = 0;
  int expert = 0, p0 = 0, ntok = 0;
};

// Inactive lanes read their zero B registers here, with a step of 0, so
// activation loads need no predicate.
__device__ const uint4 kZeroActivations[2] = {};

// Lane (g, c)'s activations for each pair of tokens tg.. of the run: token
// tg + 2 * pr + g / 4 at this lane's block (chunk k at row + k * 64), or
// the zeros (step 0) when g % 4 != c or past the slot.
template <int kPairs, int kMode, bool kBf16>
__device__ __forceinline__ void PairRows(const MmaJob& j, const RunInfo& r,
                                         int tg, int lane,
                                         const uint16_t* (&row)[kPairs],
                                         int (&step)[kPairs]) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int pr = 0; pr < kPairs; ++pr) {
    const int n = tg + 2 * pr + g / 4;
    row[pr] = reinterpret_cast<const uint16_t*>(kZeroActivations);
    step[pr] = 0;
    if ((g & 3) != c || n >= r.ntok) continue;
    const int p = r.p0 + n;
    const uint16_t* base;
    if (kMode == kModeDown) {
      base = reinterpret_cast<const uint16_t*>(j.buf.h) +
             static_cast<int64_t>(p) * j.inter_local;
    } else if (kBf16) {
      base = j.buf.x_bf16 + static_cast<int64_t>(n) * j.hidden;
    } else {
      base = reinterpret_cast<const uint16_t*>(j.buf.x16) +
             static_cast<int64_t>(__ldg(j.buf.tok_list + p)) * j.hidden;
    }
    row[pr] = base + c * 16;
    step[pr] = tiled::kChunkK;
  }
}

// This lane's 16 activations of chunk k (raw: BF16 or fp16).
__device__ __forceinline__ void LoadRawB(const uint16_t* row, int step, int k,
                                         uint4 (&raw)[2]) {
  const uint4* p = reinterpret_cast<const uint4*>(row + k * step);
  raw[0] = __ldg(p);
  raw[1] = __ldg(p + 1);
}
template <bool kBf16>
__device__ __forceinline__ void ToB(const uint4 (&raw)[2], uint32_t (&b)[8]) {
  const uint32_t w[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w,
                         raw[1].x, raw[1].y, raw[1].z, raw[1].w};
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = kBf16 ? Bf16x2ToHalf2(w[i]) : w[i];
}

// One (tile, pair) of a chunk: the mma chain, then the block scales on the
// fp32 results.
__device__ __forceinline__ void MmaScaled(const uint32_t (&a)[4][4],
                                          const uint32_t (&b)[8],
                                          uint32_t scales, float (&acc)[2]) {
  // Two chains of two mmas: half the dependent latency of one chain of four
  // (fixed-latency waits were 24 % of the stall samples, device run 18).
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f}, e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  Mma(d, a[0], b[0], b[1]);
  Mma(e, a[2], b[4], b[5]);
  Mma(d, a[1], b[2], b[3]);
  Mma(e, a[3], b[6], b[7]);
  const float2 s0 = ScalesOf(scales & 0xffffu);
  const float2 s1 = ScalesOf(scales >> 16);
  acc[0] = fmaf(d[1], s1.x, fmaf(d[0], s0.x, acc[0]));
  acc[1] = fmaf(d[3], s1.y, fmaf(d[2], s0.y, acc[1]));
  acc[0] = fmaf(e[1], s1.x, fmaf(e[0], s0.x, acc[0]));
  acc[1] = fmaf(e[3], s1.y, fmaf(e[2], s0.y, acc[1]));
}

// Down: y[token][row] += w * scale * out, for this pass's tokens.
template <int kRT, int kPairs>
__device__ void FlushDown(const MmaJob& j, const RunInfo& r, int tg,
                          const float (&acc)[kRT][kPairs][2], int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int pr = 0; pr < kPairs; ++pr) {
    const int n = tg + 2 * pr + c / 2;
#pragma unroll
    for (int t = 0; t < kRT; ++t) {
      const float o0 = acc[t][pr][0] + __shfl_xor_sync(~0u, acc[t][pr][0], 1);
      const float o1 = acc[t][pr][1] + __shfl_xor_sync(~0u, acc[t][pr][1], 1);
      if ((c & 1) || n >= r.ntok) continue;
      const int p = r.p0 + n;
      const float w = __ldg(j.buf.tok_w + p) * j.out_scale;
      float* y = j.buf.y +
                 static_cast<int64_t>(__ldg(j.buf.tok_list + p)) * j.hidden +
                 (r.rg * kRT + t) * tiled::kTileRows + g;
      atomicAdd(y, w * o0);
      atomicAdd(y + 8, w * o1);
    }
  }
}

// gate_up: this pass's full-K sums (full) or partial sums (added to
// gu_partial). Lanes c = 0 and 2 hold token tg + 2 * pr + c / 2's rows g
// (gate) and g + 8 (up) of each tile after the pairwise combine.
template <int kRT, int kPairs>
__device__ void FlushGateUp(const MmaJob& j, const RunInfo& r, int tg,
                            const float (&acc)[kRT][kPairs][2], bool full,
                            int lane) {
  const int g = lane / 4, c = lane % 4, il = j.inter_local;
#pragma unroll
  for (int pr = 0; pr < kPairs; ++pr) {
    const int n = tg + 2 * pr + c / 2;
#pragma unroll
    for (int t = 0; t < kRT; ++t) {
      const float gate =
          acc[t][pr][0] + __shfl_xor_sync(~0u, acc[t][pr][0], 1);
      const float up = acc[t][pr][1] + __shfl_xor_sync(~0u, acc[t][pr][1], 1);
      if ((c & 1) || n >= r.ntok) continue;
      const int i = (r.rg * kRT + t) * 8 + g;
      const int64_t p = r.p0 + n;
      if (full) {
        const float gs = gate * j.out_scale, us = up * j.out_scale;
        j.buf.h[p * il + i] = __float2half_rn(gs / (1.0f + __expf(-gs)) * us);
      } else {
        float* part = j.buf.gu_partial + p * 2 * il + i;
        atomicAdd(part, gate);
        atomicAdd(part + il, up);
      }
    }
  }
}

// Row groups whose partial gate_up sums this warp added, not yet counted:
// entry k lives in lane k. Counting them in batches costs one release
// fence per batch instead of one per run: each fence waits for the warp's
// outstanding memory operations, and was 16 % of gate_up's stall samples
// counted per run (device run 17).
struct PendingGateUp {
  static constexpr int kCap = 8;
  int count = 0;
  int s = 0, rg = 0, n = 0, p0 = 0, ntok = 0;  // this lane's entry
  __device__ void Push(const RunInfo& r, int lane) {
    if (lane == count) {
      s = r.s;
      rg = r.rg;
      n = r.n;
      p0 = r.p0;
      ntok = r.ntok;
    }
    ++count;
  }
};

// Counts every pending row group; the warp whose chunks complete one reads
// its sums back, restores the zeros and the counter for the next run, and
// writes h.
template <int kRT>
__device__ void FlushPendingGateUp(const MmaJob& j, PendingGateUp& pend,
                                   int rgs, int lane) {
  if (pend.count == 0) return;
  __syncwarp();  // every lane's partial adds before the release
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  bool last = false;
  if (lane < pend.count) {
    int* counter = j.buf.gu_counters + pend.s * rgs + pend.rg;
    last = atomicAdd(counter, pend.n) + pend.n == j.w.chunks;
    if (last) atomicExch(counter, 0);
  }
  unsigned done = __ballot_sync(~0u, last);
  pend.count = 0;
  if (done == 0) return;
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");  // see the others' adds
  const int il = j.inter_local;
  const int rows = kRT * 8;
  while (done != 0) {
    const int k = __ffs(done) - 1;
    done &= done - 1;
    const int rg = __shfl_sync(~0u, pend.rg, k);
    const int p0 = __shfl_sync(~0u, pend.p0, k);
    const int ntok = __shfl_sync(~0u, pend.ntok, k);
    for (int idx = lane; idx < rows * ntok; idx += 32) {
      const int n = idx / rows, i = rg * rows + idx % rows;
      const int64_t p = p0 + n;
      float* part = j.buf.gu_partial + p * 2 * il + i;
      const float gs = __ldcg(part) * j.out_scale;
      const float us = __ldcg(part + il) * j.out_scale;
      __stcg(part, 0.0f);
      __stcg(part + il, 0.0f);
      j.buf.h[p * il + i] = __float2half_rn(gs / (1.0f + __expf(-gs)) * us);
    }
  }
}

// Where token n of the walk's run keeps its activations (fp16, or BF16 for
// the shared expert before the routing), at chunk 0.
template <int kMode, bool kBf16>
__device__ const uint16_t* XRow(const MmaJob& j, const RunInfo& r, int n) {
  const int p = r.p0 + n;
  if (kMode == kModeDown) {
    return reinterpret_cast<const uint16_t*>(j.buf.h) +
           static_cast<int64_t>(p) * j.inter_local;
  }
  if (kBf16) return j.buf.x_bf16 + static_cast<int64_t>(n) * j.hidden;
  return reinterpret_cast<const uint16_t*>(j.buf.x16) +
         static_cast<int64_t>(__ldg(j.buf.tok_list + p)) * j.hidden;
}

// Where one warp's stream is: the phase's segments, the run, the token
// group and the slot inside it. Producer and consumer each walk one (the
// producer kSlots slots ahead); every lane computes the same values.
template <int kRT, int kPairs, int kMode, bool kBf16>
struct SlotWalk {
  const MmaJob* j;
  WarpRange range;
  int first_slot, per_slot, ur, W, w;
  int seg = 0, u = 0, left = 0;  // left: units of the segment from u
  RunInfo r;
  int ng = 0;         // scale groups (units) of the run
  // The run's sources at chunk kc0 (what the producer copies from).
  const uint8_t* src_code[kRT];
  const uint8_t* src_scale[kRT];
  const uint16_t* src_x[2];
  const uint16_t* x_row[2] = {nullptr, nullptr};  // the slot's, at chunk 0
  int tg = 0, i = 0;  // token group; chunk offset of the slot in the run
  bool valid = false;

  __device__ SlotWalk(const MmaJob& job, int first, int units)
      : j(&job),
        range(units, gridDim.x * kWarps, blockIdx.x * kWarps + threadIdx.x / 32,
              units <= 2 * static_cast<int>(gridDim.x) * kWarps * kRoundUnits
                  ? (units + gridDim.x * kWarps - 1) / (gridDim.x * kWarps)
                  : kRoundUnits),
        first_slot(first) {
    per_slot = job.w.rows / tiled::kTileRows / kRT * job.w.groups;
    W = gridDim.x * kWarps;
    w = blockIdx.x * kWarps + threadIdx.x / 32;
    ur = range.ur;
    seg = -1;
    r.s = -1;
    valid = NextSegment();
  }
  __device__ int Chunks() const {
    return min(SlotShape<kRT, kPairs>::kChunks, r.n - i);
  }
  __device__ bool NextSegment() {
    while (++seg <= range.full_rounds) {
      if (seg < range.full_rounds) {
        u = seg * W * ur + w * ur;
        left = ur;
      } else {
        u = range.full_rounds * W * ur + range.rem_lo;
        left = range.rem_hi - range.rem_lo;
      }
      if (left > 0) {
        LoadRun();
        return true;
      }
    }
    return false;
  }
  __device__ void LoadRun() {
    const int slot = first_slot + u / per_slot;
    const int rem = u % per_slot;
    r.rg = rem / j->w.groups;
    const int g0 = rem % j->w.groups;
    ng = min(left, j->w.groups - g0);
    r.kc0 = g0 * tiled::kGroupChunks;
    r.n = min(ng * tiled::kGroupChunks, j->w.chunks - r.kc0);
    // Consecutive runs mostly share a slot: its routing (written by the
    // router, which finished before this phase) and activation rows are
    // read once per slot, not per run (a load on the producer's path
    // stalls the whole warp, device run 18).
    if (slot != r.s) {
      r.s = slot;
      if (kBf16) {  // the shared expert, before the routing exists
        r.expert = j->shared_expert;
        r.p0 = 0;
        r.ntok = j->batch;
      } else {
        r.expert = __ldg(j->buf.slot_expert + slot);
        r.p0 = __ldg(j->buf.slot_tok_off + slot);
        r.ntok = __ldg(j->buf.slot_ntok + slot);
      }
      if (SlotShape<kRT, kPairs>::kSmemX) {
#pragma unroll
        for (int n = 0; n < 2; ++n)
          x_row[n] = n < r.ntok ? XRow<kMode, kBf16>(*j, r, n) : nullptr;
      }
    }
    tg = 0;
    i = 0;
#pragma unroll
    for (int t = 0; t < kRT; ++t) {
      const int64_t rt = r.rg * kRT + t;
      src_code[t] = j->w.codes + r.expert * j->w.code_stride +
                    (rt * j->w.chunks + r.kc0) * tiled::kChunkBytes;
      src_scale[t] = j->w.scales + r.expert * j->w.scale_stride +
                     (rt * j->w.groups + g0) * tiled::kScaleGroupBytes;
    }
    SetXSources();
  }
  // Activation sources of the current token group (kSmemX passes only).
  // kSmemX passes have <= 2 tokens: one token group, tg == 0.
  __device__ void SetXSources() {
    if (!SlotShape<kRT, kPairs>::kSmemX) return;
#pragma unroll
    for (int n = 0; n < 2; ++n)
      src_x[n] = x_row[n] != nullptr ? x_row[n] + r.kc0 * tiled::kChunkK
                                     : nullptr;
  }
  __device__ bool LastSlotOfPass() const {
    return i + SlotShape<kRT, kPairs>::kChunks >= r.n;
  }
  __device__ bool LastPassOfRun() const { return tg + 2 * kPairs >= r.ntok; }
  __device__ void Next() {
    i += SlotShape<kRT, kPairs>::kChunks;
    if (i < r.n) return;
    i = 0;
    tg += 2 * kPairs;
    if (tg < r.ntok) {
      SetXSources();
      return;
    }
    u += ng;
    left -= ng;
    if (left > 0) {
      LoadRun();
      return;
    }
    valid = NextSegment();
  }
};

inline constexpr int kIssueWeights = 1, kIssueX = 2, kIssueExpect = 4;

// Lane 0 fills a ring slot with the walk's current slot: each row tile's
// codes and scale group and (kSmemX) the pass's activations; `what` says
// which (down copies its weights before waiting for gate_up, and the
// activations after, into the same slot and mbarrier phase).
template <int kRT, int kPairs, int kMode, bool kBf16>
__device__ void IssueSlot(const SlotWalk<kRT, kPairs, kMode, kBf16>& wk,
                          uint8_t* slot, uint64_t* bar, int lane, int what) {
  using S = SlotShape<kRT, kPairs>;
  if (lane != 0) return;
  const int m = wk.Chunks();
  const uint32_t code_bytes = m * tiled::kChunkBytes;
  const uint32_t scale_bytes =
      (m + tiled::kGroupChunks - 1) / tiled::kGroupChunks *
      tiled::kScaleGroupBytes;
  const int toks = S::kSmemX ? min(2, wk.r.ntok - wk.tg) : 0;
  const uint32_t x_bytes = m * tiled::kChunkK * 2;
  if (what & kIssueExpect) {
    MbarExpectTx(bar, kRT * (code_bytes + scale_bytes) + toks * x_bytes);
  }
  if (what & kIssueWeights) {
#pragma unroll
    for (int t = 0; t < kRT; ++t) {
      BulkCopy(slot + t * S::kCodeBytes,
               wk.src_code[t] + wk.i * tiled::kChunkBytes, code_bytes, bar);
      BulkCopy(slot + kRT * S::kCodeBytes + t * S::kScaleSpan,
               wk.src_scale[t] +
                   wk.i / tiled::kGroupChunks * tiled::kScaleGroupBytes,
               scale_bytes, bar);
    }
  }
  if (what & kIssueX) {
    for (int n = 0; n < toks; ++n) {
      BulkCopy(slot + S::kXOffset + n * S::kXRowBytes,
               wk.src_x[n] + wk.i * tiled::kChunkK, x_bytes, bar);
    }
  }
}

// This lane's 16 activations of chunk q of a slot: from the slot (xb:
// the lane's place in it, or the zeroed area), or from global memory.
template <bool kSmemX>
__device__ __forceinline__ void SlotB(const uint8_t* xb, const uint16_t* row,
                                      int step, int k, int q, uint4 (&raw)[2]) {
  if constexpr (kSmemX) {
    raw[0] = *reinterpret_cast<const uint4*>(xb + q * 128);
    raw[1] = *reinterpret_cast<const uint4*>(xb + q * 128 + 16);
  } else {
    LoadRawB(row, step, k, raw);
  }
}

// Computes the m chunks of one ready slot (chunk kc first, group-aligned)
// into acc.
template <int kRT, int kPairs, bool kBf16>
__device__ __forceinline__ void ComputeSlot(const uint8_t* slot,
                                            const uint8_t* xb, int kc, int m,
                                            int pairs,
                                            const uint16_t* const (&row)[kPairs],
                                            const int (&step)[kPairs],
                                            float (&acc)[kRT][kPairs][2],
                                            int lane) {
  using S = SlotShape<kRT, kPairs>;
  const int g = lane / 4, c = lane % 4;
  const int rec = 4 * g + 2 * (c & 1);  // lane record holding block b0
  const uint8_t* scales = slot + kRT * S::kCodeBytes + rec * 8;
  const uint8_t* codes = slot + lane * 16;
#pragma unroll
  for (int gq = 0; gq < S::kChunks / tiled::kGroupChunks; ++gq) {
    if (gq * tiled::kGroupChunks >= m) break;
    uint2 s0[kRT], s1[kRT];  // blocks b0, b0 + 1: the group's 4 chunks
#pragma unroll
    for (int t = 0; t < kRT; ++t) {
      const uint8_t* sp =
          scales + t * S::kScaleSpan + gq * tiled::kScaleGroupBytes;
      s0[t] = *reinterpret_cast<const uint2*>(sp);
      s1[t] = *reinterpret_cast<const uint2*>(sp + 8);
    }
#pragma unroll
    for (int q4 = 0; q4 < tiled::kGroupChunks; ++q4) {
      const int q = gq * tiled::kGroupChunks + q4;
      if (q >= m) break;
      uint4 raw[2];
      SlotB<S::kSmemX>(xb, row[0], step[0], kc + q, q, raw);
      uint32_t a[kRT][4][4], sc[kRT];
#pragma unroll
      for (int t = 0; t < kRT; ++t) {
        const uint4 w = *reinterpret_cast<const uint4*>(
            codes + t * S::kCodeBytes + q * tiled::kChunkBytes);
        const uint32_t w0 = q4 < 2 ? s0[t].x : s0[t].y;
        const uint32_t w1 = q4 < 2 ? s1[t].x : s1[t].y;
        sc[t] = __byte_perm(w0, w1, q4 % 2 ? 0x7632 : 0x5410);
        tiled::DecodeWord(w.x, a[t][0]);
        tiled::DecodeWord(w.y, a[t][1]);
        tiled::DecodeWord(w.z, a[t][2]);
        tiled::DecodeWord(w.w, a[t][3]);
      }
#pragma unroll
      for (int pr = 0; pr < kPairs; ++pr) {
        if (pr >= pairs) break;
        uint32_t b[8];
        if (pr > 0) LoadRawB(row[pr], step[pr], kc + q, raw);
        ToB<kBf16>(raw, b);
#pragma unroll
        for (int t = 0; t < kRT; ++t) MmaScaled(a[t], b, sc[t], acc[t][pr]);
      }
    }
  }
}

// One phase (a set of units) for this warp: the producer walk runs kSlots
// slots ahead of the consumer's, across runs. kPreWait (down): the first
// slots' weights are copied before waiting for the previous kernel, their
// activations after.
template <int kRT, int kPairs, int kMode, bool kBf16, bool kPreWait>
__device__ void RunPhase(const MmaJob& j, int first_slot, int units,
                         uint8_t* ring, uint64_t* bars, const uint8_t* zeros,
                         uint32_t& phases, PendingGateUp& pend, int lane) {
  using S = SlotShape<kRT, kPairs>;
  using Walk = SlotWalk<kRT, kPairs, kMode, kBf16>;
  constexpr int kAll = kIssueWeights | kIssueX | kIssueExpect;
  const int rgs = j.w.rows / tiled::kTileRows / kRT;
  Walk prod(j, first_slot, units), cons = prod;
  int head = 0;  // next ring slot the producer fills
#pragma unroll
  for (int k = 0; k < S::kSlots; ++k) {
    if (!prod.valid) break;
    IssueSlot<kRT, kPairs, kMode, kBf16>(
        prod, ring + head * S::kBytes, bars + head, lane,
        kPreWait ? kIssueWeights | kIssueExpect : kAll);
    head = head + 1 == S::kSlots ? 0 : head + 1;
    prod.Next();
  }
  if (kPreWait) {
    GridDependencyWait();
    LaunchDependents();
    Walk again = cons;
#pragma unroll
    for (int k = 0; k < S::kSlots; ++k) {
      if (!again.valid) break;
      IssueSlot<kRT, kPairs, kMode, kBf16>(again, ring + k * S::kBytes,
                                           bars + k, lane, kIssueX);
      again.Next();
    }
  }
  const int g = lane / 4, c = lane % 4;
  int tail = 0;
  const uint16_t* row[kPairs];
  int step[kPairs];
  float acc[kRT][kPairs][2];
  int pairs = 0, xrel = -1;
  while (cons.valid) {
    if (cons.i == 0) {  // a pass (run, token group) starts
      PairRows<kPairs, kMode, kBf16>(j, cons.r, cons.tg, lane, row, step);
      pairs = min(kPairs, (cons.r.ntok - cons.tg + 1) / 2);
      const bool active = (g & 3) == c && cons.tg + g / 4 < cons.r.ntok;
      xrel = active ? S::kXOffset + (g / 4) * S::kXRowBytes + c * 32 : -1;
#pragma unroll
      for (int t = 0; t < kRT; ++t)
#pragma unroll
        for (int pr = 0; pr < kPairs; ++pr) acc[t][pr][0] = acc[t][pr][1] = 0;
    }
    uint8_t* slot = ring + tail * S::kBytes;
    MbarWait(bars + tail, (phases >> tail) & 1u);
    phases ^= 1u << tail;
    ComputeSlot<kRT, kPairs, kBf16>(slot, xrel >= 0 ? slot + xrel : zeros + c * 32,
                                    cons.r.kc0 + cons.i, cons.Chunks(), pairs,
                                    row, step, acc, lane);
    __syncwarp();  // every lane has read the slot before it is refilled
    if (prod.valid) {
      IssueSlot<kRT, kPairs, kMode, kBf16>(prod, slot, bars + tail, lane, kAll);
      prod.Next();
    }
    tail = tail + 1 == S::kSlots ? 0 : tail + 1;
    if (cons.LastSlotOfPass()) {
      const bool full = cons.r.n == j.w.chunks && cons.r.ntok <= 2 * kPairs;
      if (kMode == kModeDown) {
        FlushDown<kRT, kPairs>(j, cons.r, cons.tg, acc, lane);
      } else {
        FlushGateUp<kRT, kPairs>(j, cons.r, cons.tg, acc, full, lane);
        if (!full && cons.LastPassOfRun()) {
          pend.Push(cons.r, lane);
          if (pend.count == PendingGateUp::kCap)
            FlushPendingGateUp<kRT>(j, pend, rgs, lane);
        }
      }
    }
    cons.Next();
  }
}

template <int kRT, int kPairs, int kMode>
__global__ void __launch_bounds__(kWarps * 32, 2)
    ExpertDirectKernel(const __grid_constant__ MmaJob job) {
  using S = SlotShape<kRT, kPairs>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* ring = smem + warp * S::kWarpBytes;
  uint8_t* zeros = ring + S::kSlots * S::kBytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(zeros + S::kZeroBytes);
  for (int i = lane * 16; i < S::kZeroBytes; i += 32 * 16)
    *reinterpret_cast<uint4*>(zeros + i) = make_uint4(0, 0, 0, 0);
  if (lane == 0) {
    for (int k = 0; k < S::kSlots; ++k) MbarInit(bars + k);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncwarp();
  uint32_t phases = 0;
  PendingGateUp pend;
  const int per_slot = job.w.rows / tiled::kTileRows / kRT * job.w.groups;
  if (kMode == kModeDown) {
    // Down's weights and slot list do not depend on gate_up (the router
    // finished before gate_up's routed part): its first copies go out
    // before waiting for gate_up's h.
    const int units = __ldcg(job.buf.meta + kMetaSlots) * per_slot;
    RunPhase<kRT, kPairs, kModeDown, false, true>(job, 0, units, ring, bars,
                                                  zeros, phases, pend, lane);
    return;
  }
  int first = 0;
  if (job.shared_first) {
    RunPhase<kRT, kPairs, kModeGateUp, true, false>(job, 0, per_slot, ring,
                                                    bars, zeros, phases, pend, lane);
    first = 1;
  }
  GridDependencyWait();
  LaunchDependents();
  const int units = (__ldcg(job.buf.meta + kMetaSlots) - first) * per_slot;
  RunPhase<kRT, kPairs, kModeGateUp, false, false>(
      job, first, units, ring, bars, zeros, phases, pend, lane);
  FlushPendingGateUp<kRT>(job, pend, per_slot / job.w.groups, lane);
}

}  // namespace direct_detail

// Launches one instantiation on a persistent grid (all blocks that fit),
// with programmatic serialization when job.pdl.
template <int kRT, int kPairs, int kMode>
GpuStatus LaunchExpertDirect(const MmaJob& job, int device, int sm_count,
                             cudaStream_t stream) {
  using S = direct_detail::SlotShape<kRT, kPairs>;
  constexpr int kSmem = direct_detail::kWarps * S::kWarpBytes;
  constexpr int kMaxDevices = 64;
  static int blocks_per_sm[kMaxDevices] = {};
  auto* kernel = &direct_detail::ExpertDirectKernel<kRT, kPairs, kMode>;
  if (device < 0 || device >= kMaxDevices) {
    return Fail(RunStatus::kBadProblem, "options.device: must be in [0, 64)");
  }
  if (blocks_per_sm[device] == 0) {
    MG_CUDA(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int n = 0;
    MG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &n, kernel, direct_detail::kWarps * 32, kSmem));
    if (n < 1) {
      return Fail(RunStatus::kCannotImplement,
                  "direct expert kernel does not fit on one SM");
    }
    blocks_per_sm[device] = n;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(sm_count * blocks_per_sm[device]));
  config.blockDim = dim3(direct_detail::kWarps * 32);
  config.dynamicSmemBytes = kSmem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = job.pdl ? 1 : 0;
  MG_CUDA(cudaLaunchKernelEx(&config, kernel, job));
  return OkStatus();
}

}  // namespace moetune::gpu
