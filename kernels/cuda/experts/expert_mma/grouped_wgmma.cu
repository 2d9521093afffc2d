// grouped_wgmma: the MoE layer at serving batches (64 to 512 tokens, where
// every expert is read and each gets a few to a few dozen tokens) on
// Hopper's wgmma. Router; the token tiles (token_tiles.cuh: each slot's
// positions in tiles of 32, their input in wgmma B layout); ONE persistent
// launch for gate_up of every (slot, token tile) (SiLU * up fused, h stored
// in down's B layout), ONE for down (routing weight fused, one row per
// position); a fixed-order combine (the same bits every run).
//
// A block is one consumer warpgroup and one producer warp. A unit is (slot,
// block rows, token tile) over the whole K, taken from a counter at run time (a
// unit streams 150-450 KB, so one atomic a unit costs nothing and uneven
// routing balances itself); a slot's token tiles are consecutive units, so a
// weight byte read for one tile is an L2 hit for the next. The producer warp
// streams each K step of a unit into a ring of shared-memory stages by TMA bulk
// copies completing on the stage's mbarrier: every 16-row tile's NVFP4 codes
// and scales (contiguous in the tiled layout; L2 evict_first) and one copy per
// 8 tokens of B. Each warp decodes its rows to fp16 in registers with the block
// scale applied (fused_gemv's decode: exact, since E2M1 x E4M3 fits fp16) as
// wgmma's A, B comes from shared memory, N = the tile's tokens rounded up
// to 8. The next 16 rows' chunk is decoded while a chunk's wgmmas run.
// Tile (block_n, block_k, stages): block_n rows a unit (64 a wgmma), block_k
// K a stage; the ring's depth is `stages`, which sets the blocks an SM, or
// (stages 0) follows from a fixed share of the SM's shared memory.
#include <string>

#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/experts/expert_mma/expert_mma_impl.cuh"
#include "kernels/cuda/experts/expert_mma/grouped_wgmma.cuh"
#include "kernels/cuda/experts/expert_mma/token_tiles.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"

namespace moetune::gpu {
namespace {

using namespace mma_detail;

constexpr int kConsumerWarps = 4;                    // one warpgroup
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer
constexpr int kBStepBytes = 256;                     // one k16 step of 8 tokens

// Blocks an SM of a tile without stages of its own; the ring gets what is
// left of the SM's shared memory. 128x128 fits 4 with 2 stages each;
// 128x256 is faster as 2 blocks of 3 stages than as 3 of 2 (batch 64: 1551
// vs 1592 us).
template <int kRT, int kCPS>
constexpr int BudgetBlocksPerSm() {
  return kRT == 2 && kCPS == 2 ? 4 : 2;
}
constexpr int kSmemPerSm = 232448;     // sm_90: 227 KB a block, 228 an SM
constexpr int kSmemPerBlock = 232448;  // 227 KB
constexpr int kSmemReserve = 1024;     // the runtime's, a block

// The bytes of one stage (one K step of a unit).
template <int kRT, int kCPS>
struct WgStage {
  static constexpr int kTiles = 4 * kRT;  // 16-row tiles of a unit
  static constexpr int kGroups = kCPS >= 4 ? kCPS / 4 : 1;
  static constexpr int kCodeBytes = kTiles * kCPS * tiled::kChunkBytes;
  static constexpr int kScaleBytes = kTiles * kGroups * tiled::kScaleGroupBytes;
  static constexpr int kBGroupBytes = kCPS * 4 * kBStepBytes;  // 8 tokens
  static constexpr int kBytes =
      kCodeBytes + kScaleBytes + kTileGroups * kBGroupBytes;
  static_assert(kRT * kCPS % 2 == 0, "the A registers alternate in pairs");
};

// The ring of a tile: kStages stages (the tile's `stages`), or with 0 as
// many as BudgetBlocksPerSm's share of the SM holds (2 to 6).
template <int kRT, int kCPS, int kStages>
struct WgRing : WgStage<kRT, kCPS> {
  using Stage = WgStage<kRT, kCPS>;
  static constexpr int kRingBudget =
      kSmemPerSm / BudgetBlocksPerSm<kRT, kCPS>() - kSmemReserve -
      4096;  // - tables
  static constexpr int kRaw = kRingBudget / Stage::kBytes;
  static constexpr int kCount = kStages > 0
                                    ? kStages
                                    : (kRaw < 2 ? 2 : (kRaw > 6 ? 6 : kRaw));
};

struct Workspace {
  __half* xb;  // [tiles][kTileTokens * hidden], B layout
  __half* hb;  // [tiles][kTileTokens * inter_local], B layout
  float* yp;   // [max_positions][hidden]; none when down adds into y
  TileTables tables;
};

// The workspace's parts carved out of `base` (nullptr: only sized, into
// *bytes); without yp when `down_into_y`.
Workspace Carve(const LayerArgs& a, void* base, size_t* bytes = nullptr,
                bool down_into_y = false) {
  Carver c(base);
  const size_t tile_values =
      static_cast<size_t>(TileBound(a.geo)) * kTileTokens;
  Workspace w;
  w.xb = c.Take<__half>(tile_values * a.geo.hidden);
  w.hb = c.Take<__half>(tile_values * a.geo.inter_local);
  w.yp = down_into_y ? nullptr
                     : c.Take<float>(static_cast<size_t>(a.geo.max_positions) *
                                     a.geo.hidden);
  w.tables.tile_first = c.Take<int>(a.geo.max_slots + 1);
  w.tables.counters = c.Take<int>(kTileCounters);
  w.tables.place = c.Take<int>(a.geo.max_positions);
  if (bytes != nullptr) *bytes = c.used();
  return w;
}

size_t WorkspaceBytes(const LayerArgs& a) {
  size_t bytes = 0;
  Carve(a, nullptr, &bytes);
  return bytes;
}

struct WgJob {
  MatrixView w;
  RunBuffers buf;
  Workspace ws;
  const __half* b = nullptr;  // xb (gate_up) or hb (down)
  int mode = kModeGateUp;
  float out_scale = 0;
  int inter_local = 0, hidden = 0;
  int rgs = 0;    // units of block rows
  int steps = 0;  // K steps of a unit
  // The slots it runs: the router's first meta[slots_meta] (kMetaSlots:
  // all; kMetaWide: the wide ones, which lead the list).
  int slots_meta = kMetaSlots;
};

// What the producer put in a stage besides its bytes.
struct StageMeta {
  int valid = 0;  // 0: no unit is left (the block stops)
  int ks = 0, rg = 0, tile = 0, p0 = 0, ntok = 0;
};

// The slots' first tiles, which a block copies into shared memory once for
// the producer's search; a run has at most kMaxTableSlots slots here
// (Launch refuses more). The other slot tables are read once a unit.
constexpr int kMaxTableSlots = 511;
struct SmemTables {
  int tile_first[kMaxTableSlots + 1];  // [slots + 1]
};

__device__ int LoadTables(const WgJob& j, SmemTables* t) {
  const int slots = __ldcg(j.buf.meta + j.slots_meta);
  for (int s = threadIdx.x; s <= slots; s += blockDim.x)
    t->tile_first[s] = __ldcg(j.ws.tables.tile_first + s);
  return slots;
}

// Unit u (the slot's row groups in order, each over the slot's token tiles)
// as the stage metadata of its first K step; sets *expert.
__device__ StageMeta UnitAt(const WgJob& j, const SmemTables& t, int slots,
                            int u, int* expert) {
  int lo = 0, hi = slots - 1;  // the slot holding unit u
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.tile_first[mid] * j.rgs <= u) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int tiles = t.tile_first[lo + 1] - t.tile_first[lo];
  const int rem = u - t.tile_first[lo] * j.rgs, tt = rem % tiles;
  StageMeta m;
  m.valid = 1;
  m.rg = rem / tiles;
  m.tile = t.tile_first[lo] + tt;
  m.p0 = __ldcg(j.buf.slot_tok_off + lo) + tt * kTileTokens;
  m.ntok = min(kTileTokens, __ldcg(j.buf.slot_ntok + lo) - tt * kTileTokens);
  *expert = __ldcg(j.buf.slot_expert + lo);
  return m;
}

// The producer warp: claims units from the counter (lane 0) and streams
// each K step into the next free stage, its copies spread over the lanes:
// lane l < kTiles the l-th 16-row tile's codes and scales (L2 evict_first),
// lane kTiles + g the g-th 8 tokens of B.
template <int kRT, int kCPS, int kStages>
__device__ void Produce(const WgJob& j, const SmemTables& t, int slots,
                        uint8_t* ring, uint64_t* full, uint64_t* empty,
                        StageMeta* metas, int lane) {
  using S = WgRing<kRT, kCPS, kStages>;
  static_assert(S::kTiles + kTileGroups <= 32, "one copy a lane");
  const int units = t.tile_first[slots] * j.rgs;
  const uint64_t policy = EvictFirstPolicy();
  StageMeta cur;
  cur.valid = 1;
  cur.ks = j.steps;  // the first stage claims
  int expert = 0;
  for (int i = 0;; ++i) {
    const int st = i % S::kCount;
    if (i >= S::kCount) MbarWait(empty + st, (i / S::kCount - 1) & 1);
    if (lane == 0) {
      if (cur.ks == j.steps) {
        const int u = atomicAdd(j.ws.tables.counters + j.mode, 1);
        cur.valid = u < units;
        if (cur.valid) cur = UnitAt(j, t, slots, u, &expert);
      }
      metas[st] = cur;
      const int groups = (cur.ntok + 7) / 8;
      MbarArriveExpectTx(full + st, cur.valid ? S::kCodeBytes + S::kScaleBytes +
                                                    groups * S::kBGroupBytes
                                              : 0);
    }
    cur.valid = __shfl_sync(~0u, cur.valid, 0);
    if (!cur.valid) return;
    cur.ks = __shfl_sync(~0u, cur.ks, 0);
    cur.rg = __shfl_sync(~0u, cur.rg, 0);
    cur.tile = __shfl_sync(~0u, cur.tile, 0);
    cur.ntok = __shfl_sync(~0u, cur.ntok, 0);
    expert = __shfl_sync(~0u, expert, 0);
    uint8_t* stage = ring + st * S::kBytes;
    const int kc0 = cur.ks * kCPS;
    if (lane < S::kTiles) {
      const int row_tile = cur.rg * S::kTiles + lane;
      BulkCopyWithPolicy(stage + lane * kCPS * tiled::kChunkBytes,
                         j.w.codes + expert * j.w.code_stride +
                             tiled::CodeOffset(row_tile, kc0, 0, j.w.chunks),
                         kCPS * tiled::kChunkBytes, full + st, policy);
      BulkCopyWithPolicy(
          stage + S::kCodeBytes + lane * S::kGroups * tiled::kScaleGroupBytes,
          j.w.scales + expert * j.w.scale_stride +
              tiled::ScaleOffset(
                  row_tile, kc0 / tiled::kGroupChunks * tiled::kGroupChunks, 0,
                  j.w.groups),
          S::kGroups * tiled::kScaleGroupBytes, full + st, policy);
    } else if (const int g = lane - S::kTiles; g * 8 < cur.ntok) {
      const int64_t k = j.w.k;
      BulkCopy(stage + S::kCodeBytes + S::kScaleBytes + g * S::kBGroupBytes,
               j.b + static_cast<int64_t>(cur.tile) * kTileTokens * k +
                   g * 8 * k + static_cast<int64_t>(kc0) * 64 * 8,
               S::kBGroupBytes, full + st);
    }
    ++cur.ks;
  }
}

// d (+)= A (this warp's 16 rows, fp16 registers) x B (8 kNG tokens).
template <int kNG>
__device__ __forceinline__ void WgmmaF16(float (&d)[16], const uint32_t (&a)[4],
                                         uint64_t desc, int accumulate);

template <>
__device__ __forceinline__ void WgmmaF16<1>(float (&d)[16],
                                            const uint32_t (&a)[4],
                                            uint64_t desc, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
      : "memory");
#endif
}

template <>
__device__ __forceinline__ void WgmmaF16<2>(float (&d)[16],
                                            const uint32_t (&a)[4],
                                            uint64_t desc, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
      : "memory");
#endif
}

template <>
__device__ __forceinline__ void WgmmaF16<3>(float (&d)[16],
                                            const uint32_t (&a)[4],
                                            uint64_t desc, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n24k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, p, "
      "1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
      : "memory");
#endif
}

template <>
__device__ __forceinline__ void WgmmaF16<4>(float (&d)[16],
                                            const uint32_t (&a)[4],
                                            uint64_t desc, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
      : "memory");
#endif
}

// Group g of a stage (chunk g / kRT of this warp's row tile g % kRT) as four
// A fragments, block scales applied.
template <int kRT, int kCPS>
__device__ __forceinline__ void DecodeGroup(const uint8_t* stage, int g, int ks,
                                            int warp, int lane,
                                            uint32_t (&a)[4][4]) {
  using S = WgStage<kRT, kCPS>;
  const int q = g / kRT, jt = (g % kRT) * 4 + warp;
  const uint4 cw = *reinterpret_cast<const uint4*>(
      stage + (jt * kCPS + q) * tiled::kChunkBytes + lane * 16);
  const uint2 sg = *reinterpret_cast<const uint2*>(
      stage + S::kCodeBytes +
      (jt * S::kGroups + (kCPS < 4 ? 0 : q / 4)) * tiled::kScaleGroupBytes +
      lane * 8);
  // Stages of < 4 chunks start inside a scale group.
  const int qs = kCPS < 4 ? (ks * kCPS + q) % 4 : q % 4;
  uint32_t s_lo, s_hi;
  ScalePair(ScaleOf(sg, qs), &s_lo, &s_hi);
  DecodeScaled(cw.x, s_lo, s_hi, a[0]);
  DecodeScaled(cw.y, s_lo, s_hi, a[1]);
  DecodeScaled(cw.z, s_lo, s_hi, a[2]);
  DecodeScaled(cw.w, s_lo, s_hi, a[3]);
}

// One stage: kCPS chunks x kRT row tiles, each four k16 wgmmas. A's
// registers rotate over three buffers, so group g + 1 is decoded while
// groups g and g - 1 may still run; the wait after it leaves at most one
// group in flight. After group 0's wait every group of the previous stage
// is done: `release` is freed then (each thread arrives: a branch or warp
// barrier inside the wgmma pipeline makes ptxas serialize it). On return
// the stage's last group may still run, and buffer 0 is free.
template <int kRT, int kCPS, int kNG>
__device__ void ComputeStage(const uint8_t* stage, uint32_t b_addr, int ks,
                             float (&d)[kRT][16], int warp, int lane,
                             uint64_t* release) {
  using S = WgStage<kRT, kCPS>;
  constexpr int kG = kRT * kCPS;
  uint32_t a[3][4][4];
  DecodeGroup<kRT, kCPS>(stage, 0, ks, warp, lane, a[0]);
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const int q = g / kRT, rt = g % kRT;
    WgmmaFence();
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      WgmmaF16<kNG>(d[rt], a[g % 3][m],
                    // B of step 4 q + m: its two K halves 128 bytes apart,
                    // token groups kBGroupBytes apart.
                    NoSwizzleDescriptor<128, S::kBGroupBytes>(
                        b_addr + (q * 4 + m) * kBStepBytes),
                    ks == 0 && q == 0 && m == 0 ? 0 : 1);
    }
    WgmmaCommit();
    if (g + 1 < kG)
      DecodeGroup<kRT, kCPS>(stage, g + 1, ks, warp, lane, a[(g + 1) % 3]);
    WgmmaWait<1>();
    if (g == 0) MbarArrive(release);  // every thread: no branch in here
  }
  // The next stage decodes into buffer 0 first: the last group must not
  // still read it.
  if constexpr ((kG - 1) % 3 == 0) WgmmaWait<0>();
}

template <int kRT, int kCPS>
__device__ void ComputeAny(const uint8_t* stage, const StageMeta& m,
                           float (&d)[kRT][16], int warp, int lane,
                           uint64_t* release) {
  using S = WgStage<kRT, kCPS>;
  const uint32_t b = SmemAddr(stage + S::kCodeBytes + S::kScaleBytes);
  switch ((m.ntok + 7) / 8) {
    case 1:
      return ComputeStage<kRT, kCPS, 1>(stage, b, m.ks, d, warp, lane, release);
    case 2:
      return ComputeStage<kRT, kCPS, 2>(stage, b, m.ks, d, warp, lane, release);
    case 3:
      return ComputeStage<kRT, kCPS, 3>(stage, b, m.ks, d, warp, lane, release);
    default:
      return ComputeStage<kRT, kCPS, 4>(stage, b, m.ks, d, warp, lane, release);
  }
}

// gate_up rows of 16-row tile t: 8 gates then their 8 ups (intermediate
// index t * 8 + g); h = SiLU(gate) * up into the tile's B layout for down.
template <int kRT>
__device__ void GateUpOut(const WgJob& j, const StageMeta& m,
                          const float (&d)[kRT][16], int warp, int lane) {
  const int g = lane / 4, c = lane % 4, k = j.inter_local;
  __half* hb = j.ws.hb + static_cast<int64_t>(m.tile) * kTileTokens * k;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    const int i = ((m.rg * kRT + rt) * 4 + warp) * 8 + g;
#pragma unroll
    for (int nt = 0; nt < kTileGroups; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = nt * 8 + 2 * c + e;
        if (n >= m.ntok) continue;
        const float gate = d[rt][nt * 4 + e] * j.out_scale;
        const float up = d[rt][nt * 4 + 2 + e] * j.out_scale;
        hb[TileBOffset(n, i, k)] =
            __float2half_rn(gate / (1.0f + __expf(-gate)) * up);
      }
    }
  }
}

// down rows t * 16 + g and + 8, times the routing weight: one row per
// position (combined later in a fixed order), or with kIntoY added into
// the token's output row by atomics (as fused_gemv's down adds its own).
template <int kRT, bool kIntoY>
__device__ void DownOut(const WgJob& j, const StageMeta& m,
                        const float (&d)[kRT][16], int warp, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int nt = 0; nt < kTileGroups; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = nt * 8 + 2 * c + e;
      if (n >= m.ntok) continue;
      const int p = m.p0 + n;
      const float w = __ldg(j.buf.tok_w + p) * j.out_scale;
      float* out =
          kIntoY ? j.buf.y + static_cast<int64_t>(__ldg(j.buf.tok_list + p)) *
                                 j.hidden
                 : j.ws.yp + static_cast<int64_t>(p) * j.hidden;
#pragma unroll
      for (int rt = 0; rt < kRT; ++rt) {
        const int r = ((m.rg * kRT + rt) * 4 + warp) * tiled::kTileRows + g;
        if constexpr (kIntoY) {
          atomicAdd(out + r, w * d[rt][nt * 4 + e]);
          atomicAdd(out + r + 8, w * d[rt][nt * 4 + 2 + e]);
        } else {
          out[r] = w * d[rt][nt * 4 + e];
          out[r + 8] = w * d[rt][nt * 4 + 2 + e];
        }
      }
    }
  }
}

// The consumer warpgroup: each stage as it lands; a unit's epilogue after
// its last K step.
template <int kRT, int kCPS, int kStages, int kMode, bool kIntoY>
__device__ void Consume(const WgJob& j, uint8_t* ring, uint64_t* full,
                        uint64_t* empty, const StageMeta* metas, int warp,
                        int lane) {
  using S = WgRing<kRT, kCPS, kStages>;
  float d[kRT][16] = {};
  // The previous stage, not yet released; at first a spare barrier that
  // nobody waits on.
  uint64_t* pending = empty + S::kCount;
  for (int it = 0;; ++it) {
    const int st = it % S::kCount;
    MbarWait(full + st, (it / S::kCount) & 1);
    const StageMeta m = metas[st];
    if (!m.valid) break;
    ComputeAny<kRT, kCPS>(ring + st * S::kBytes, m, d, warp, lane, pending);
    pending = empty + st;
    if (m.ks == j.steps - 1) {
      WgmmaWait<0>();
      MbarArrive(pending);
      pending = empty + S::kCount;
      if (kMode == kModeGateUp) {
        GateUpOut<kRT>(j, m, d, warp, lane);
      } else {
        DownOut<kRT, kIntoY>(j, m, d, warp, lane);
      }
    }
  }
  WgmmaWait<0>();
}

template <int kRT, int kCPS, int kStages>
constexpr int SmemBytes() {
  using S = WgRing<kRT, kCPS, kStages>;
  return S::kCount * (S::kBytes + 16 + static_cast<int>(sizeof(StageMeta))) +
         8 + static_cast<int>(sizeof(SmemTables));
}

// Blocks an SM: BudgetBlocksPerSm's without stages of its own, else as many
// as the SM's shared memory holds (at most 4).
template <int kRT, int kCPS, int kStages>
constexpr int WgBlocksPerSm() {
  constexpr int smem = SmemBytes<kRT, kCPS, kStages>();
  static_assert(smem <= kSmemPerBlock, "the ring exceeds a block's 227 KB");
  if constexpr (kStages == 0) return BudgetBlocksPerSm<kRT, kCPS>();
  constexpr int fit = kSmemPerSm / (smem + kSmemReserve);
  return fit > 4 ? 4 : fit;
}

// Warps 0-3: the consumer warpgroup; warp 4: the producer.
template <int kRT, int kCPS, int kStages, int kMode, bool kIntoY>
__global__ void __launch_bounds__(kThreads, WgBlocksPerSm<kRT, kCPS, kStages>())
    GroupedWgmmaKernel(const __grid_constant__ WgJob job) {
  using S = WgRing<kRT, kCPS, kStages>;
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + S::kCount * S::kBytes);
  uint64_t* empty = full + S::kCount;  // + 1 spare
  StageMeta* metas = reinterpret_cast<StageMeta*>(empty + S::kCount + 1);
  SmemTables* tables = reinterpret_cast<SmemTables*>(metas + S::kCount);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int k = 0; k < S::kCount; ++k) {
      MbarInit(full + k, 1);
      MbarInit(empty + k, kConsumerWarps * 32);
    }
    MbarInit(empty + S::kCount, kConsumerWarps * 32);  // the spare
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  GridDependencyWait();  // the tiles (gate_up) or h (down)
  const int slots = LoadTables(job, tables);
  __syncthreads();
  if (warp == kConsumerWarps) {
    Produce<kRT, kCPS, kStages>(job, *tables, slots, smem, full, empty, metas,
                                lane);
  } else {
    Consume<kRT, kCPS, kStages, kMode, kIntoY>(job, smem, full, empty, metas,
                                               warp, lane);
  }
  LaunchDependents();
}

template <int kRT, int kCPS, int kStages, int kMode, bool kIntoY = false>
GpuStatus LaunchMode(const WgJob& job, int device, int sm_count,
                     cudaStream_t stream) {
  static int blocks_per_sm[64] = {};
  auto* kernel = &GroupedWgmmaKernel<kRT, kCPS, kStages, kMode, kIntoY>;
  constexpr int smem = SmemBytes<kRT, kCPS, kStages>();
  int per_sm = 0;
  MG_RETURN_IF_ERROR(BlocksPerSm(kernel, kThreads, smem, device, blocks_per_sm,
                                 "grouped_wgmma", &per_sm));
  return LaunchJob(kernel, job, sm_count * per_sm, kThreads, smem, stream);
}

WgJob Job(const LayerArgs& a, const Workspace& ws, bool gate_up, int block_n,
          int block_k) {
  WgJob j;
  j.w = gate_up ? a.gate_up : a.down;
  j.buf = a.buf;
  j.ws = ws;
  j.b = gate_up ? ws.xb : ws.hb;
  j.mode = gate_up ? kModeGateUp : kModeDown;
  j.out_scale = j.w.tensor_scale * kDecodeScale;
  j.inter_local = a.geo.inter_local;
  j.hidden = a.geo.hidden;
  j.rgs = j.w.rows / block_n;
  j.steps = j.w.k / block_k;
  return j;
}

// Its routing tables live in shared memory (SmemTables).
GpuStatus CheckSlots(const LayerArgs& a) {
  if (a.geo.max_slots <= kMaxTableSlots) return OkStatus();
  return Fail(RunStatus::kCannotImplement,
              "grouped_wgmma: at most " + std::to_string(kMaxTableSlots) +
                  " expert slots a rank (its routing tables live in shared "
                  "memory); this rank has " +
                  std::to_string(a.geo.max_slots));
}

template <int kBN, int kBK, int kStages>
GpuStatus LaunchTile(const LayerArgs& a, const Workspace& ws,
                     cudaStream_t stream) {
  constexpr int kRT = kBN / 64, kCPS = kBK / 64;
  MG_RETURN_IF_ERROR((LaunchMode<kRT, kCPS, kStages, kModeGateUp>(
      Job(a, ws, true, kBN, kBK), a.device, a.sm_count, stream)));
  return LaunchMode<kRT, kCPS, kStages, kModeDown>(
      Job(a, ws, false, kBN, kBK), a.device, a.sm_count, stream);
}

GpuStatus Launch(const LayerArgs& a, void* workspace, cudaStream_t stream) {
  MG_RETURN_IF_ERROR(CheckSlots(a));
  const Workspace ws = Carve(a, workspace);
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
  MG_RETURN_IF_ERROR(
      LaunchGatherTiles(a, ws.tables, ws.xb, kMetaSlots, stream));
  GpuStatus status =
      Fail(RunStatus::kCannotImplement, "grouped_wgmma: unknown tile");
#define MOETUNE_WGMMA_LAUNCH(n, k, s)          \
  if (a.tile == backends::Tile{(n), (k), (s)}) \
    status = LaunchTile<(n), (k), (s)>(a, ws, stream);
  MOETUNE_GROUPED_WGMMA_TILES(MOETUNE_WGMMA_LAUNCH)
#undef MOETUNE_WGMMA_LAUNCH
  MG_RETURN_IF_ERROR(status);
  return LaunchCombine(a, ws.yp, false, stream);
}

}  // namespace

size_t WideWgmmaWorkspaceBytes(const LayerArgs& a) {
  size_t bytes = 0;
  Carve(a, nullptr, &bytes, /*down_into_y=*/true);
  return bytes;
}

GpuStatus LaunchWideWgmma(const LayerArgs& a, void* workspace,
                          cudaStream_t stream) {
  MG_RETURN_IF_ERROR(CheckSlots(a));
  constexpr int kBN = backends::kWideWgmmaBlockN;
  constexpr int kBK = backends::kWideWgmmaBlockK;
  constexpr int kRT = kBN / 64, kCPS = kBK / 64;
  const Workspace ws = Carve(a, workspace, nullptr, /*down_into_y=*/true);
  MG_RETURN_IF_ERROR(LaunchGatherTiles(a, ws.tables, ws.xb, kMetaWide, stream));
  WgJob gate_up = Job(a, ws, true, kBN, kBK),
        down = Job(a, ws, false, kBN, kBK);
  gate_up.slots_meta = down.slots_meta = kMetaWide;
  MG_RETURN_IF_ERROR((LaunchMode<kRT, kCPS, 0, kModeGateUp>(
      gate_up, a.device, a.sm_count, stream)));
  return LaunchMode<kRT, kCPS, 0, kModeDown, true>(down, a.device, a.sm_count,
                                                   stream);
}

}  // namespace moetune::gpu

namespace moetune::backends::grouped_wgmma {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::WorkspaceBytes,
                                      &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::grouped_wgmma
