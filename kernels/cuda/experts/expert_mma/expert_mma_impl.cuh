// Definitions of the expert kernel templates declared by expert_mma.cuh.
// Included only by the .cu files that instantiate them from the tile
// X-macros of kernels/backends/expert_mma/tiles.h (fused_gemv.cu,
// grouped_mma.cu).
#pragma once

#include <string>

#include "kernels/cuda/experts/expert_mma/expert_mma.cuh"

namespace moetune::gpu {
namespace mma_detail {

// Copies unit `u` of expert `expert` (codes and its scale groups) into
// `stage`, with 32-bit offsets inside the expert. kFull: all kCPS chunks
// exist (always at the real dims; only tiny K is ragged).
template <int kRT, int kCPS, bool kFull>
__device__ __forceinline__ void IssueUnit(const MmaJob& j, const Cursor& u,
                                          int expert, uint8_t* stage,
                                          int lane) {
  using S = Stage<kRT, kCPS>;
  const int kc0 = u.ks * kCPS, rt0 = u.rg * kRT;
  const uint8_t* codes =
      j.w.codes + expert * j.w.code_stride +
      static_cast<uint32_t>(((rt0 * j.w.chunks + kc0) * 32 + lane) * 16);
  const uint8_t* scales =
      j.w.scales + expert * j.w.scale_stride +
      static_cast<uint32_t>(
          ((rt0 * j.w.groups + kc0 / tiled::kGroupChunks) * 32 + lane) * 8);
  uint8_t* dst = stage + lane * 16;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
    for (int q = 0; q < kCPS; ++q) {
      if (kFull || kc0 + q < j.w.chunks) {
        CpAsync16(dst + (rt * kCPS + q) * tiled::kChunkBytes,
                  codes + (rt * j.w.chunks + q) * tiled::kChunkBytes);
      }
    }
#pragma unroll
    for (int gi = 0; gi < S::kGroups; ++gi) {
      if (kFull || kc0 / tiled::kGroupChunks + gi < j.w.groups) {
        CpAsync8(stage + S::kCodeBytes +
                     (rt * S::kGroups + gi) * tiled::kScaleGroupBytes +
                     lane * 8,
                 scales + (rt * j.w.groups + gi) * tiled::kScaleGroupBytes);
      }
    }
  }
}

// The four A fragments of one word (8 weights) times the block scales.
__device__ __forceinline__ void DecodeScaled(uint32_t word, uint32_t s_lo,
                                             uint32_t s_hi, uint32_t (&a)[4]) {
  uint32_t h[4];
  tiled::DecodeWord(word, h);
  a[0] = HMul2(h[0], s_lo);
  a[1] = HMul2(h[1], s_hi);
  a[2] = HMul2(h[2], s_lo);
  a[3] = HMul2(h[3], s_hi);
}

// Two BF16 (one word) -> two fp16 (exact inside fp16's range).
__device__ __forceinline__ uint32_t Bf16x2ToHalf2(uint32_t v) {
  uint32_t out;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n"
      : "=r"(out)
      : "f"(__uint_as_float(v & 0xffff0000u)), "f"(__uint_as_float(v << 16)));
  return out;
}

// This lane's 16 activations of one chunk; p always points at a real row
// (lanes past the slot's tokens read a valid row whose products are unused).
template <bool kB16>
__device__ __forceinline__ void LoadB(const uint16_t* p, uint32_t (&bw)[8]) {
  const uint4 b0 = __ldg(reinterpret_cast<const uint4*>(p));
  const uint4 b1 = __ldg(reinterpret_cast<const uint4*>(p) + 1);
  const uint32_t raw[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) bw[i] = kB16 ? Bf16x2ToHalf2(raw[i]) : raw[i];
}

// The scale bytes (row g, row g + 8) of chunk q of a 4-chunk group.
__device__ __forceinline__ uint16_t ScaleOf(uint2 group, int q) {
  const uint32_t w = q < 2 ? group.x : group.y;
  return static_cast<uint16_t>(q % 2 == 0 ? w & 0xffffu : w >> 16);
}

// A whole unit whose chunks all exist, the first kUse n-tiles (one: <= 8
// tokens, the common case; two: a 9-16-token tile): every code word and
// scale of a group read from shared memory at once, the next chunk's
// activations loaded while this one is decoded.
template <int kRT, int kCPS, int kNT, int kUse, bool kB16>
__device__ __forceinline__ void ComputeUnitFast(const uint8_t* stage, int ks,
                                                const Run<kNT>& run,
                                                float (&acc)[kRT][kNT][4],
                                                int lane) {
  static_assert(kUse >= 1 && kUse <= kNT, "n-tiles used: 1 to kNT");
  using S = Stage<kRT, kCPS>;
  const uint16_t* bp[kUse];
  uint32_t bnext[kUse][8];
#pragma unroll
  for (int u = 0; u < kUse; ++u) {
    bp[u] = run.b[u] + ks * kCPS * tiled::kChunkK;
    LoadB<kB16>(bp[u], bnext[u]);
  }
#pragma unroll
  for (int g4 = 0; g4 < (kCPS + 3) / 4; ++g4) {
    constexpr int kInGroup = kCPS < 4 ? kCPS : 4;
    uint4 cw[kRT][kInGroup];
    uint2 sg[kRT];
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
      for (int q = 0; q < kInGroup; ++q) {
        cw[rt][q] = *reinterpret_cast<const uint4*>(
            stage + (rt * kCPS + g4 * 4 + q) * tiled::kChunkBytes + lane * 16);
      }
      sg[rt] = ScaleGroupAt<kRT, kCPS>(stage, rt, g4, lane);
    }
#pragma unroll
    for (int q = 0; q < kInGroup; ++q) {
      const int chunk = g4 * 4 + q;  // within the unit
      uint32_t bw[kUse][8];
#pragma unroll
      for (int u = 0; u < kUse; ++u) {
#pragma unroll
        for (int i = 0; i < 8; ++i) bw[u][i] = bnext[u][i];
        if (chunk + 1 < kCPS)
          LoadB<kB16>(bp[u] + (chunk + 1) * tiled::kChunkK, bnext[u]);
      }
      // Chunk position inside its scale group: units of < 4 chunks start
      // inside a group.
      const int qs = kCPS < 4 ? (ks * kCPS + q) % 4 : q;
#pragma unroll
      for (int rt = 0; rt < kRT; ++rt) {
        uint32_t s_lo, s_hi;
        ScalePair(ScaleOf(sg[rt], qs), &s_lo, &s_hi);
        const uint32_t words[4] = {cw[rt][q].x, cw[rt][q].y, cw[rt][q].z,
                                   cw[rt][q].w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          uint32_t a[4];
          DecodeScaled(words[m], s_lo, s_hi, a);
#pragma unroll
          for (int u = 0; u < kUse; ++u)
            Mma(acc[rt][u], a, bw[u][2 * m], bw[u][2 * m + 1]);
        }
      }
    }
  }
}

// Raw activation words of one chunk (this lane's 16 columns).
__device__ __forceinline__ void LoadRaw(const uint16_t* p, uint32_t (&raw)[8]) {
  const uint4 b0 = __ldg(reinterpret_cast<const uint4*>(p));
  const uint4 b1 = __ldg(reinterpret_cast<const uint4*>(p) + 1);
  raw[0] = b0.x, raw[1] = b0.y, raw[2] = b0.z, raw[3] = b0.w;
  raw[4] = b1.x, raw[5] = b1.y, raw[6] = b1.z, raw[7] = b1.w;
}

// The activation ring of the one-n-tile path: the raw words of the next two
// chunks, loaded two chunks before their use and kept across the units of
// one run: activations loaded one chunk ahead (and at a unit's start not at
// all ahead) stall the mma for a fifth of gate_up's time. Runs of more
// tokens keep the four-chunks-at-once path (ComputeUnitFast): with the ring
// for every run, 16x512 is 5 % slower at batch 8, likely the deeper loads
// of 8 activation rows through the ~28 KB of L1 that 209 KB of shared memory
// leave (kernels/cuda/moe/PERF.md).
inline constexpr int kRingMaxTokens = 2;

struct BRing {
  uint32_t a[8], b[8];  // even chunks in a, odd chunks in b
  bool ready = false;   // a, b hold chunks 0 and 1 of the coming unit
};

// One chunk of the ring path: converts this chunk's activations, refills
// their ring slot with chunk q + 2 (next unit's first chunks at the end, when
// the run goes on), reads chunk q + 1's code words from shared memory, then
// decodes and multiplies.
template <int kRT, int kCPS, int kNT, bool kB16>
__device__ __forceinline__ void RingChunk(
    const uint8_t* stage, int q, int ks, const uint16_t* bp, bool next_same,
    const uint2 (&sg)[kRT][Stage<kRT, kCPS>::kGroups], uint4 (&cw)[kRT],
    uint32_t (&slot)[8], float (&acc)[kRT][kNT][4], int lane) {
  uint32_t bw[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) bw[i] = kB16 ? Bf16x2ToHalf2(slot[i]) : slot[i];
  if (q + 2 < kCPS || next_same) LoadRaw(bp + (q + 2) * tiled::kChunkK, slot);
  uint4 cn[kRT];
  if (q + 1 < kCPS) {
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
      cn[rt] = *reinterpret_cast<const uint4*>(
          stage + (rt * kCPS + q + 1) * tiled::kChunkBytes + lane * 16);
    }
  }
  // Units of < 4 chunks start inside a scale group.
  const int qs = kCPS < 4 ? (ks * kCPS + q) % 4 : q % 4;
  const int gi = kCPS < 4 ? 0 : q / 4;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    uint32_t s_lo, s_hi;
    ScalePair(ScaleOf(sg[rt][gi], qs), &s_lo, &s_hi);
    const uint32_t words[4] = {cw[rt].x, cw[rt].y, cw[rt].z, cw[rt].w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      uint32_t a[4];
      DecodeScaled(words[m], s_lo, s_hi, a);
      Mma(acc[rt][0], a, bw[2 * m], bw[2 * m + 1]);
    }
  }
  if (q + 1 < kCPS) {
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) cw[rt] = cn[rt];
  }
}

// A whole unit whose chunks all exist, <= kRingMaxTokens tokens, an even
// number of chunks: activations from the ring (tail of the previous unit loaded
// this unit's first two chunks when br.ready), code words one chunk ahead.
template <int kRT, int kCPS, int kNT, bool kB16>
__device__ __forceinline__ void ComputeUnitRing(const uint8_t* stage, int ks,
                                                const Run<kNT>& run,
                                                float (&acc)[kRT][kNT][4],
                                                BRing& br, bool next_same,
                                                int lane) {
  static_assert(kCPS % 2 == 0, "the ring alternates even and odd chunks");
  using S = Stage<kRT, kCPS>;
  const uint16_t* bp = run.b[0] + ks * kCPS * tiled::kChunkK;
  if (!br.ready) {
    LoadRaw(bp, br.a);
    LoadRaw(bp + tiled::kChunkK, br.b);
  }
  uint2 sg[kRT][S::kGroups];
  uint4 cw[kRT];
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
    for (int gi = 0; gi < S::kGroups; ++gi) {
      sg[rt][gi] = ScaleGroupAt<kRT, kCPS>(stage, rt, gi, lane);
    }
    cw[rt] = *reinterpret_cast<const uint4*>(
        stage + rt * kCPS * tiled::kChunkBytes + lane * 16);
  }
#pragma unroll
  for (int q = 0; q < kCPS; q += 2) {
    RingChunk<kRT, kCPS, kNT, kB16>(stage, q, ks, bp, next_same, sg, cw, br.a,
                                    acc, lane);
    RingChunk<kRT, kCPS, kNT, kB16>(stage, q + 1, ks, bp, next_same, sg, cw,
                                    br.b, acc, lane);
  }
}

// The general unit: the first kUse n-tiles (the rest of a run's columns are
// past its tokens), chunks past K skipped. Each chunk's activations of all
// kUse n-tiles are loaded at once (a loop that stops at the run's last
// n-tile serialises them: +7 % at 64 tokens skewed).
template <int kRT, int kCPS, int kNT, int kUse, bool kB16>
__device__ __forceinline__ void ComputeUnitGeneral(const uint8_t* stage, int ks,
                                                   int chunks,
                                                   const Run<kNT>& run,
                                                   float (&acc)[kRT][kNT][4],
                                                   int lane) {
  using S = Stage<kRT, kCPS>;
  const int kc0 = ks * kCPS;
#pragma unroll 1
  for (int q = 0; q < kCPS; ++q) {
    const int kc = kc0 + q;
    if (kc >= chunks) break;
    const int gi = q / 4;
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
      const uint4 cw = *reinterpret_cast<const uint4*>(
          stage + (rt * kCPS + q) * tiled::kChunkBytes + lane * 16);
      const uint16_t sp = *reinterpret_cast<const uint16_t*>(
          stage + S::kCodeBytes +
          (rt * S::kGroups + gi) * tiled::kScaleGroupBytes + lane * 8 +
          (kc % tiled::kGroupChunks) * 2);
      uint32_t s_lo, s_hi;
      ScalePair(sp, &s_lo, &s_hi);
      uint32_t a[4][4];
      DecodeScaled(cw.x, s_lo, s_hi, a[0]);
      DecodeScaled(cw.y, s_lo, s_hi, a[1]);
      DecodeScaled(cw.z, s_lo, s_hi, a[2]);
      DecodeScaled(cw.w, s_lo, s_hi, a[3]);
#pragma unroll
      for (int nt = 0; nt < kUse; ++nt) {
        uint32_t bw[8];
        LoadB<kB16>(run.b[nt] + kc * tiled::kChunkK, bw);
#pragma unroll
        for (int m = 0; m < 4; ++m)
          Mma(acc[rt][nt], a[m], bw[2 * m], bw[2 * m + 1]);
      }
    }
  }
}

// Whether a stream-K kernel's units walk the router's 64-token tiles (the
// wide part, kernels of 4 or 8 n-tiles: a slot may hold the whole batch)
// rather than its slots (a cursor's s is then a tile). A compile-time
// property: as a run-time test of slot_part in every kernel, the one-n-tile
// kernels' code changes and fused_gemv 16x512 runs 1.5 % slower at 8-32
// tokens. LaunchAs checks that slot_part agrees.
template <int kNT, bool kStreamK>
inline constexpr bool kWalksTiles = (kStreamK && kNT >= 4);

// A unit of more than 8 tokens, or past K (tiny dims only): by the general
// path over every n-tile, except in the kernel of 8 n-tiles (above 32
// tokens), whose routed tiles mostly hold 9-32 tokens (every expert at 256-
// 512): those take the fast path's two n-tiles (<= 16 tokens) or the
// general path's four (<= 32). Not so in the kernels of 2 and 4 n-tiles:
// there the same dispatch makes the TP8 step 0.8-1.1 % slower at 8-16
// sequences and 32x256 5 % slower at 16 tokens.
template <int kRT, int kCPS, int kNT, bool kB16>
__device__ __forceinline__ void ComputeUnitWide(const uint8_t* stage, int ks,
                                                bool full, int chunks,
                                                const Run<kNT>& run,
                                                float (&acc)[kRT][kNT][4],
                                                int lane) {
  if constexpr (kNT == 8) {
    if (full && run.ntok <= 16) {
      ComputeUnitFast<kRT, kCPS, kNT, 2, kB16>(stage, ks, run, acc, lane);
      return;
    }
    if (full && run.ntok <= 32) {
      ComputeUnitGeneral<kRT, kCPS, kNT, 4, kB16>(stage, ks, chunks, run, acc,
                                                  lane);
      return;
    }
  }
  ComputeUnitGeneral<kRT, kCPS, kNT, kNT, kB16>(stage, ks, chunks, run, acc,
                                                lane);
}

// Where a unit sequence's slots come from: the router's lists, or (kFixed)
// the shared expert before the routing exists.
// kTiles: s is one of the router's 64-token tiles (kWalksTiles).
template <bool kFixed, bool kStreamK, bool kTiles = false>
struct SlotSource {
  const MmaJob* j;
  int tt;  // tiles: the token tile
  __device__ int Expert(int s) const {
    if (kFixed) return j->shared_expert;
    // L2 reads: down issues its first copies before waiting for gate_up.
    if (kTiles) return __ldcg(&j->buf.tile_info[s].y) & 0xffff;
    return __ldcg(j->buf.slot_expert + s);
  }
};

// A run's first position and token count: the shared expert's tile s
// (kFixed: its positions are the token ids), slot s whole (stream-K over
// slots), or one 64-token tile of a slot.
template <bool kFixed, bool kStreamK, bool kTiles>
__device__ __forceinline__ void RunTokens(
    const SlotSource<kFixed, kStreamK, kTiles>& src, int s, int* p0,
    int* ntok) {
  const MmaJob& j = *src.j;
  if (kFixed) {  // outside the wide kernels: one slot of <= 16 tokens
    *p0 = kTiles ? s * kGroupedTokens : 0;
    *ntok = kTiles ? min(kGroupedTokens, j.batch - *p0) : j.batch;
    return;
  }
  if (kTiles) {
    const int2 tile = __ldg(j.buf.tile_info + s);
    *p0 = tile.x;
    *ntok = tile.y >> 16;
    return;
  }
  const int off = __ldg(j.buf.slot_tok_off + s), n = __ldg(j.buf.slot_ntok + s);
  *p0 = kStreamK ? off : off + src.tt * kGroupedTokens;
  *ntok = kStreamK ? n : min(kGroupedTokens, n - src.tt * kGroupedTokens);
}

// A new (slot, row group): its expert, token window and B row pointers.
template <int kRT, int kNT, bool kFixed, bool kStreamK, bool kB16, bool kTiles>
__device__ __forceinline__ void StartRun(
    const SlotSource<kFixed, kStreamK, kTiles>& src, const Cursor& u,
    Run<kNT>& run, float (&acc)[kRT][kNT][4], int lane) {
  const MmaJob& j = *src.j;
  run.s = u.s;
  run.rg = u.rg;
  run.steps = 0;
  RunTokens(src, u.s, &run.p0, &run.ntok);
  const uint16_t* base =
      kB16 ? j.buf.x_bf16 : reinterpret_cast<const uint16_t*>(j.b_src);
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    // Past the slot's tokens: the slot's first token (valid memory; its
    // products land in accumulator columns that are never stored).
    const int nn = nt * 8 + lane / 4 < run.ntok ? nt * 8 + lane / 4 : 0;
    const int row = kFixed            ? (kTiles ? run.p0 + nn : nn)
                    : j.b_by_position ? run.p0 + nn
                                      : __ldg(j.buf.tok_list + run.p0 + nn);
    run.b[nt] = base + static_cast<int64_t>(row) * j.ld_b + (lane % 4) * 16;
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
      acc[rt][nt][0] = acc[rt][nt][1] = acc[rt][nt][2] = acc[rt][nt][3] = 0.0f;
    }
  }
}

// Whether a kernel of mode k runs mode m, as a plain condition: this form
// (kModeAny, -1, names a kernel for both modes) is the measured one; folding
// it into if constexpr reorders down's entry code.
inline constexpr int kModeAny = -1;
__device__ __forceinline__ bool IsMode(int k, const MmaJob& j, int m) {
  return k == kModeAny ? j.mode == m : k == m;
}

// Adds a partial gate_up row group; true (with the full sums in acc) for the
// warp that completes it, which also restores the zeros for the next run.
template <int kRT, int kNT>
__device__ bool AddPartials(const MmaJob& j, const Run<kNT>& run,
                            float (&acc)[kRT][kNT][4], int steps_total, int rgs,
                            int lane) {
  const int g = lane / 4, c = lane % 4, il = j.inter_local;
  float* part = j.buf.gu_partial;
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = nt * 8 + 2 * c + e;
          if (n >= run.ntok) continue;
          const int i = (run.rg * kRT + rt) * 8 + g;
          float* gate = part + static_cast<int64_t>(run.p0 + n) * 2 * il + i;
          if (pass == 0) {
            atomicAdd(gate, acc[rt][nt][e]);
            atomicAdd(gate + il, acc[rt][nt][2 + e]);
          } else {
            acc[rt][nt][e] = __ldcg(gate);
            acc[rt][nt][2 + e] = __ldcg(gate + il);
            __stcg(gate, 0.0f);
            __stcg(gate + il, 0.0f);
          }
        }
      }
    }
    if (pass == 1) break;
    // The warp barrier orders every lane's partial adds before lane 0's
    // release; lane 0's acquire, then the barrier, orders the last warp's
    // reads after every other warp's adds. One acq_rel atomic instead of a
    // warp-wide fence on both sides (such fences make 6-13 % of gate_up's
    // stalls).
    __syncwarp();
    int last = 0;
    if (lane == 0) {
      int* counter = j.buf.gu_counters + run.s * rgs + run.rg;
      const int old = AtomicAddAcqRelGpu(counter, run.steps);
      last = old + run.steps == steps_total;
      if (last) atomicExch(counter, 0);
    }
    if (!__shfl_sync(~0u, last, 0)) return false;
    __syncwarp();
  }
  return true;
}

template <int kRT, int kNT>
__device__ void GateUpEpilogue(const MmaJob& j, const Run<kNT>& run,
                               const float (&acc)[kRT][kNT][4], int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = nt * 8 + 2 * c + e;
        if (n >= run.ntok) continue;
        const int i = (run.rg * kRT + rt) * 8 + g;
        const float gate = acc[rt][nt][e] * j.out_scale;
        const float up = acc[rt][nt][2 + e] * j.out_scale;
        const float h = gate / (1.0f + __expf(-gate)) * up;
        j.buf.h[static_cast<int64_t>(run.p0 + n) * j.inter_local + i] =
            __float2half_rn(h);
      }
    }
  }
}

template <int kRT, int kNT, bool kStreamK>
__device__ void DownEpilogue(const MmaJob& j, const Run<kNT>& run,
                             const float (&acc)[kRT][kNT][4], int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = nt * 8 + 2 * c + e;
      if (n >= run.ntok) continue;
      const int p = run.p0 + n;
      const float w = __ldg(j.buf.tok_w + p) * j.out_scale;
      float* out =
          kStreamK ? j.buf.y + static_cast<int64_t>(__ldg(j.buf.tok_list + p)) *
                                   j.hidden
                   : j.yp + static_cast<int64_t>(p) * j.hidden;
#pragma unroll
      for (int rt = 0; rt < kRT; ++rt) {
        const int r = (run.rg * kRT + rt) * tiled::kTileRows + g;
        if (kStreamK) {
          atomicAdd(out + r, w * acc[rt][nt][e]);
          atomicAdd(out + r + 8, w * acc[rt][nt][2 + e]);
        } else {
          out[r] = w * acc[rt][nt][e];
          out[r + 8] = w * acc[rt][nt][2 + e];
        }
      }
    }
  }
}

template <int kRT, int kNT, int kMode, bool kStreamK>
__device__ void Flush(const MmaJob& j, const Run<kNT>& run,
                      float (&acc)[kRT][kNT][4], int steps_total, int rgs,
                      int lane) {
  if (IsMode(kMode, j, kModeGateUp)) {
    if (run.steps < steps_total &&
        !AddPartials<kRT, kNT>(j, run, acc, steps_total, rgs, lane)) {
      return;
    }
    GateUpEpilogue<kRT, kNT>(j, run, acc, lane);
  } else {
    DownEpilogue<kRT, kNT, kStreamK>(j, run, acc, lane);
  }
}

// The unit sequence of one warp: stream-K rounds, or one tile's K steps.
// Advance(i, c, left): c becomes unit i's cursor given unit i - 1's, with
// `left` units left in the current contiguous segment (one division per
// segment, none per unit).
struct StreamKSeq {
  WarpRange range;
  int first_slot, per_slot, rgs, steps;
  __device__ int Count() const { return range.Count(); }
  // Whether the unit after the current one is its Next() (same segment).
  __device__ bool Continues(int left) const { return left > 0; }
  __device__ void Advance(int i, Cursor& c, int& left) const {
    if (left > 0) {
      c.Next(rgs, steps);
      --left;
      return;
    }
    int u;
    if (i < range.full_rounds * range.ur) {
      u = (i / range.ur) * range.W * range.ur + range.w * range.ur;
      left = range.ur - 1;
    } else {
      u = range.full_rounds * range.W * range.ur + range.rem_lo;
      left = range.rem_hi - range.rem_lo - 1;
    }
    c.s = first_slot + u / per_slot;
    const int rem = u % per_slot;
    c.rg = rem / steps;
    c.ks = rem % steps;
  }
};

struct TileSeq {
  int s, rg, steps;
  __device__ int Count() const { return steps; }
  __device__ bool Continues(int) const { return true; }
  __device__ void Advance(int i, Cursor& c, int&) const {
    c.s = s;
    c.rg = rg;
    c.ks = i;
  }
};

// Streams one warp's units through its cp.async ring and accumulates; the
// ring is empty again on return. kPreWait: the first copies (weights only)
// are issued before waiting for the previous kernel (griddepcontrol).
template <int kRT, int kCPS, int kNT, int kMode, bool kRagged, bool kStreamK,
          bool kFixed, bool kB16, bool kPreWait, class Seq, bool kTiles>
__device__ void RunUnits(const MmaJob& j,
                         const SlotSource<kFixed, kStreamK, kTiles>& src,
                         const Seq& seq, uint8_t* ring, int lane) {
  using S = Stage<kRT, kCPS>;
  constexpr int kStages = S::kCount;
  const int count = seq.Count();
  const int rgs = j.w.rows / tiled::kTileRows / kRT;
  const int steps = (j.w.chunks + kCPS - 1) / kCPS;
  constexpr bool ragged = kRagged;
  constexpr bool kRing = kCPS % 2 == 0;
  Cursor in, cur;
  int in_left = 0, cur_left = 0, in_stage = 0, cur_stage = 0, in_s = -1,
      in_e = 0;
  auto issue = [&](int i) {
    seq.Advance(i, in, in_left);
    if (in.s != in_s) {
      in_s = in.s;
      in_e = src.Expert(in.s);
    }
    uint8_t* stage = ring + in_stage * S::kBytes;
    in_stage = in_stage + 1 == kStages ? 0 : in_stage + 1;
    if (!ragged || (in.ks + 1) * kCPS <= j.w.chunks) {
      IssueUnit<kRT, kCPS, true>(j, in, in_e, stage, lane);
    } else {
      IssueUnit<kRT, kCPS, false>(j, in, in_e, stage, lane);
    }
  };
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) issue(i);
    CpAsyncCommit();
  }
  if (kPreWait) {
    GridDependencyWait();
    LaunchDependents();
  }
  Run<kNT> run;
  float acc[kRT][kNT][4];
  BRing br;
  for (int i = 0; i < count; ++i) {
    __syncwarp();  // every lane is done reading the stage about to be refilled
    if (i + kStages - 1 < count) issue(i + kStages - 1);
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();
    seq.Advance(i, cur, cur_left);
    if (cur.s != run.s || cur.rg != run.rg) {
      if (run.s >= 0) {
        Flush<kRT, kNT, kMode, kStreamK>(j, run, acc, steps, rgs, lane);
      }
      StartRun<kRT, kNT, kFixed, kStreamK, kB16>(src, cur, run, acc, lane);
      br.ready = false;
    }
    ++run.steps;
    const uint8_t* stage = ring + cur_stage * S::kBytes;
    cur_stage = cur_stage + 1 == kStages ? 0 : cur_stage + 1;
    // One n-tile at full K (kNT == 1, !kRagged) is always the fast path:
    // the general one is not even compiled there.
    const bool full = !ragged || (cur.ks + 1) * kCPS <= j.w.chunks;
    if (full && run.ntok <= 8) {
      if constexpr (kRing) {
        if (run.ntok > kRingMaxTokens) {
          ComputeUnitFast<kRT, kCPS, kNT, 1, kB16>(stage, cur.ks, run, acc,
                                                   lane);
          br.ready = false;
        } else {
          // The next unit continues this run with all its chunks present: the
          // ring may load its first two chunks' activations now.
          const bool next_same = i + 1 < count && cur.ks + 1 < steps &&
                                 seq.Continues(cur_left) &&
                                 (!ragged || (cur.ks + 2) * kCPS <= j.w.chunks);
          ComputeUnitRing<kRT, kCPS, kNT, kB16>(stage, cur.ks, run, acc, br,
                                                next_same, lane);
          br.ready = next_same;
        }
      } else {
        ComputeUnitFast<kRT, kCPS, kNT, 1, kB16>(stage, cur.ks, run, acc, lane);
      }
    } else if constexpr (kNT > 1 || kRagged) {
      ComputeUnitWide<kRT, kCPS, kNT, kB16>(stage, cur.ks, full, j.w.chunks,
                                            run, acc, lane);
      br.ready = false;
    }
  }
  if (run.s >= 0)
    Flush<kRT, kNT, kMode, kStreamK>(j, run, acc, steps, rgs, lane);
  CpAsyncWait<0>();
}

// The slots [*lo, *hi) of the job's part, or for the wide part its tiles
// (read through L2: down reads them before waiting for gate_up, after the
// router finished).
template <bool kTiles>
__device__ __forceinline__ void SlotPart(const MmaJob& j, int* lo, int* hi) {
  if (kTiles) {
    *lo = 0;
    *hi = __ldcg(j.buf.tile_prefix + __ldcg(j.buf.meta + kMetaWide));
    return;
  }
  const int slots = __ldcg(j.buf.meta + kMetaSlots);
  const int wide =
      j.slot_part == kAllSlots ? 0 : __ldcg(j.buf.meta + kMetaWide);
  *lo = j.slot_part == kNarrowSlots ? wide : 0;
  *hi = j.slot_part == kWideSlots ? wide : slots;
}

// Tiles: this block's slot, token tile and the warp's row group.
template <int kWarps>
__device__ bool TileWork(const MmaJob& j, int rgs, int warp, int* s, int* rg,
                         int* tt) {
  const int slots = __ldg(j.buf.meta + kMetaSlots);
  const int rbs = rgs / kWarps;
  const int tile = blockIdx.x / rbs;
  if (tile >= __ldg(j.buf.meta + kMetaTiles)) return false;
  int lo = 0, hi = slots - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (__ldg(j.buf.tile_prefix + mid) <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  *s = lo;
  *rg = (blockIdx.x % rbs) * kWarps + warp;
  *tt = tile - __ldg(j.buf.tile_prefix + lo);
  return true;
}

}  // namespace mma_detail

// Blocks an SM should hold: 24 warps for the common one-n-tile kernels
// (<= 85 registers), fewer where more tokens need more accumulators.
template <int kRT, int kNT, int kWarps>
constexpr int MinBlocks() {
  if (kWarps == 8) return 2;
  if (kNT == 1) return kRT == 1 ? 6 : 4;
  if (kRT == 2) return kNT == 2 ? 4 : kNT == 4 ? 3 : 2;
  return kNT == 2 ? 5 : kNT == 4 ? 4 : 3;
}

// kMode and kRagged (K not a multiple of the unit's K) are template
// parameters so that each kernel holds only its own pipelines and epilogue:
// one binary for every path made down stall on instruction fetch for a third
// of its samples.
template <int kRT, int kCPS, int kNT, int kWarps, bool kStreamK, int kMode,
          bool kRagged>
__global__ void __launch_bounds__(kWarps * 32, (MinBlocks<kRT, kNT, kWarps>()))
    ExpertMmaKernel(const __grid_constant__ MmaJob job) {
  using namespace mma_detail;
  using S = Stage<kRT, kCPS>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* ring = smem + warp * S::kCount * S::kBytes;
  const int rgs = job.w.rows / tiled::kTileRows / kRT;
  const int steps = (job.w.chunks + kCPS - 1) / kCPS;
  if constexpr (kStreamK) {
    constexpr bool kTiles = kWalksTiles<kNT, kStreamK>;
    const int W = gridDim.x * kWarps, w = blockIdx.x * kWarps + warp;
    const int per_slot = rgs * steps;
    if (IsMode(kMode, job, kModeDown)) {
      // Down's weights and slot list do not depend on gate_up: its first
      // copies go out before waiting for gate_up's h (the router finished
      // before gate_up started its routed part; read through L2).
      int lo = 0, hi = 0;
      SlotPart<kTiles>(job, &lo, &hi);
      const StreamKSeq seq{
          WarpRange((hi - lo) * per_slot, W, w, job.round_units), lo, per_slot,
          rgs, steps};
      RunUnits<kRT, kCPS, kNT, kMode, kRagged, true, false, false, true>(
          job, SlotSource<false, true, kTiles>{&job, 0}, seq, ring, lane);
      return;
    }
    {
      int first = 0;
      if (job.shared_first) {  // before the routing exists
        // Its slot 0, or its tiles (the router's first) in the wide part.
        const int n =
            kTiles ? (job.batch + kGroupedTokens - 1) / kGroupedTokens : 1;
        const StreamKSeq seq{WarpRange(n * per_slot, W, w, job.round_units), 0,
                             per_slot, rgs, steps};
        RunUnits<kRT, kCPS, kNT, kMode, kRagged, true, true, true, false>(
            job, SlotSource<true, true, kTiles>{&job, 0}, seq, ring, lane);
        first = n;
      }
      GridDependencyWait();
      LaunchDependents();
      int lo = 0, hi = 0;
      SlotPart<kTiles>(job, &lo, &hi);
      lo = max(lo, first);
      const StreamKSeq seq{
          WarpRange(max(hi - lo, 0) * per_slot, W, w, job.round_units), lo,
          per_slot, rgs, steps};
      RunUnits<kRT, kCPS, kNT, kMode, kRagged, true, false, false, false>(
          job, SlotSource<false, true, kTiles>{&job, 0}, seq, ring, lane);
    }
  } else {
    GridDependencyWait();
    LaunchDependents();
    int s = 0, rg = 0, tt = 0;
    if (!TileWork<kWarps>(job, rgs, warp, &s, &rg, &tt)) return;
    RunUnits<kRT, kCPS, kNT, kMode, kRagged, false, false, false, false>(
        job, SlotSource<false, false>{&job, tt}, TileSeq{s, rg, steps}, ring,
        lane);
  }
}

// Launches one instantiation: a persistent grid (stream-K) or one block per
// (token tile bound, row block) (tiles); with programmatic serialization.
namespace mma_detail {

template <int kRT, int kCPS, int kNT, int kWarps, bool kStreamK, int kMode,
          bool kRagged>
GpuStatus LaunchAs(const MmaJob& job, int device, int sm_count,
                   cudaStream_t stream) {
  using S = mma_detail::Stage<kRT, kCPS>;
  constexpr int kSmem = kWarps * S::kCount * S::kBytes;
  static int blocks_per_sm[64] = {};
  auto* kernel =
      &ExpertMmaKernel<kRT, kCPS, kNT, kWarps, kStreamK, kMode, kRagged>;
  if (kStreamK && (job.slot_part == kWideSlots) != kWalksTiles<kNT, kStreamK>) {
    return Fail(RunStatus::kBadProblem,
                "job.slot_part: the wide slots run in, and only in, the "
                "kernels of 4 or 8 n-tiles; got part " +
                    std::to_string(job.slot_part) + " with " +
                    std::to_string(kNT) + " n-tiles");
  }
  int per_sm = 0;
  MG_RETURN_IF_ERROR(BlocksPerSm(kernel, kWarps * 32, kSmem, device,
                                 blocks_per_sm, "expert", &per_sm));
  const int row_blocks = job.w.rows / tiled::kTileRows / kRT / kWarps;
  const int grid = kStreamK ? sm_count * per_sm : job.tile_bound * row_blocks;
  if (grid <= 0) return OkStatus();
  return LaunchJob(kernel, job, grid, kWarps * 32, kSmem, stream);
}

}  // namespace mma_detail

namespace mma_detail {

// Mode kMode's kernel for K that is (kRagged) or is not a multiple of the
// unit's K.
template <int kRT, int kCPS, int kNT, int kWarps, bool kStreamK, int kMode>
GpuStatus LaunchMode(const MmaJob& job, int device, int sm_count,
                     cudaStream_t stream) {
  const bool ragged = job.w.chunks % kCPS != 0;
  return ragged ? LaunchAs<kRT, kCPS, kNT, kWarps, kStreamK, kMode, true>(
                      job, device, sm_count, stream)
                : LaunchAs<kRT, kCPS, kNT, kWarps, kStreamK, kMode, false>(
                      job, device, sm_count, stream);
}

}  // namespace mma_detail

template <int kRT, int kCPS, int kNT, int kWarps, bool kStreamK>
GpuStatus LaunchExpertMma(const MmaJob& job, int device, int sm_count,
                          cudaStream_t stream) {
  using mma_detail::LaunchMode;
  if (job.mode == kModeGateUp) {
    return LaunchMode<kRT, kCPS, kNT, kWarps, kStreamK, kModeGateUp>(
        job, device, sm_count, stream);
  }
  if (job.mode == kModeDown) {
    return LaunchMode<kRT, kCPS, kNT, kWarps, kStreamK, kModeDown>(
        job, device, sm_count, stream);
  }
  return Fail(RunStatus::kBadProblem,
              "job.mode: must be 0 (gate_up) or 1 (down), got " +
                  std::to_string(job.mode));
}

}  // namespace moetune::gpu
