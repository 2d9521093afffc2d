// fused_gemv_fp8: fused_gemv's schedule (router, ONE stream-K gate_up launch
// for every active expert, ONE for down) for a single token on Hopper's FP8
// tensor cores: the weights decoded to E4M3 in registers (tiled_e4m3.h: 5
// integer operations per 8 weights) and multiplied by
// wgmma.m64n8k32.f32.e4m3.e4m3 (A from registers, B from shared memory).
// mma.sync with e4m3 is no FP8 instruction on sm_90 (it unpacks to fp16 and
// runs two HMMA.16816: version 13, PERF.md); only wgmma is.
//
// Why one token: an NVFP4 block scale belongs to (row, 16 K), and an FP8
// k32 step spans all four lanes' blocks of a chunk, so the scale cannot be
// applied to A as fused_gemv does in fp16. Instead each of the 8 columns of
// B carries ONE block's activations (hi or lo half, act_fp8.cuh) and zeros
// elsewhere: column 2c + h = block c's half h, and lane (g, c)'s
// accumulators are exactly rows g and g + 8 of block c, hi and lo. Two k32
// steps cover a 64-K chunk; then each lane adds hi + lo and multiplies by
// its block's weight scale (the scale pair the tiled layout already gives
// lane (g, c)) and the activation block's inverse scale: two FFMA per row
// per chunk instead of 16 HMUL2. The 8 columns are all used by one token;
// larger batches stay on fused_gemv.
//
// A block is one warpgroup (4 warps); a unit is (slot, row group of the
// block, K step). Each stage of the block's ring holds one unit: every
// warp's kRT row tiles (codes and scales, TMA bulk copies by its lane 0) and
// the K step's B bytes (written by the router for x, by gate_up's epilogue
// for h; copied by warp 0), completing on the stage's mbarrier. Tile block_n
// = the block's rows (4 warps x kRT x 16), block_k = K per unit; the ring
// depth follows from a fixed budget of shared memory per block (PERF.md
// versions 13-18 measure the choices). gate_up routes its token itself from
// the router's scores as soon as every router block has written its own
// (RouteOneToken), so the router's serial tail runs while gate_up streams;
// down issues its first weight copies before waiting for gate_up, as in
// fused_gemv.
#include <string>

#include "kernels/backend_catalog.h"
#include "kernels/cuda/act_fp8.cuh"
#include "kernels/cuda/backends.cuh"
#include "kernels/cuda/expert_mma_impl.cuh"
#include "kernels/cuda/router.cuh"
#include "kernels/cuda/tiled_e4m3.h"
#include "kernels/cuda/topk_warp.cuh"

namespace moetune::gpu {
namespace {

using namespace mma_detail;

constexpr int kWarps = 4;  // one warpgroup
constexpr int kBlocksPerSm = 3;
// Ring bytes per block: kBlocksPerSm blocks an SM share ~221 KB.
constexpr int kRingBytesPerBlock = 73728;

template <int kRT, int kCPS>
struct Fp8Stage {
  using S = Stage<kRT, kCPS>;
  static constexpr int kB = kCPS * act_fp8::kChunkBytes;  // shared B bytes
  static constexpr int kBytes = kWarps * S::kBytes + kB;
  static constexpr int kRaw = kRingBytesPerBlock / kBytes;
  static constexpr int kCount = kRaw < 2 ? 2 : kRaw > 8 ? 8 : kRaw;
};

// The current (slot, row group) of this warp and its activations' inverse
// scales (the B bytes themselves come through the ring).
struct Fp8Run : Run<1> {
  const float* inv = nullptr;  // block c's inverse scale of chunk 0
};

// What each block needs to route the token itself (RouteOneToken).
struct OneTokenRouting {
  int experts = 0, top_k = 0;
  float scaling = 0;
  int e_lo = 0, e_hi = 0;  // owned routed experts
  int has_shared = 0, shared_index = 0;
  int router_blocks = 0;  // what scores_written reaches
};

// The kernel's parameters: both matrices' jobs and the routing.
struct Fp8Layer {
  MmaJob gate_up, down;
  OneTokenRouting route;
  bool pdl = false;  // launch with programmatic serialization
  __host__ __device__ const RunBuffers& buf() const { return gate_up.buf; }
};

// The token's routing, worked out by every block of gate_up and down from
// the router's scores: the picks in the router's order (score desc) and
// this rank's slots in its order (the shared expert first, then the owned
// picks ascending). With one token, slot s's only position is s.
struct TokenSlots {
  int count;
  int expert[kRouterMaxTopK + 1];  // stored expert index per slot
  float weight[kRouterMaxTopK + 1];  // routing weight per slot
  int pick_e[kRouterMaxTopK];        // pick r: expert, sigmoid score
  float pick_s[kRouterMaxTopK];
};

// wgmma exists on sm_90a only: other targets compile these to a trap (the
// probe reports fused_gemv_fp8 unavailable on any device but sm_90).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MOETUNE_NO_WGMMA 1
#endif
__device__ __forceinline__ void WgmmaFence() {
#ifdef MOETUNE_NO_WGMMA
  __trap();
#else
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaCommit() {
#ifndef MOETUNE_NO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaWaitAll() {
#ifndef MOETUNE_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// d = (accumulate ? d : 0) + A (this warp's 16 rows, registers) x B (shared
// memory, descriptor); the warpgroup's four warps issue it together.
__device__ __forceinline__ void Wgmma(float (&d)[4], const uint32_t (&a)[4],
                                      uint64_t desc, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
      : "memory");
#endif
}
// B of one k32 step at shared address `addr`: K-major, no swizzle, core
// matrices 128 bytes apart along K (leading byte offset), one along N.
__device__ __forceinline__ uint64_t BDescriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(128 >> 4) << 16) |
         (static_cast<uint64_t>(256 >> 4) << 32);
}
__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(count)
               : "memory");
}
// This thread's arrival on `bar`, announcing `bytes` of copies to come.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar,
                                                   uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// `count` arrivals of this thread on `bar`, with no copies announced.
__device__ __forceinline__ void MbarArrive(uint64_t* bar, int count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   SmemAddr(bar)),
               "r"(count)
               : "memory");
}
// Until the phase of parity `phase` of `bar` has completed.
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

template <int kRT>
__device__ void StartFp8Run(const MmaJob& j, const Cursor& u, Fp8Run& run,
                            float (&acc)[kRT][1][4], int lane) {
  run.s = u.s;
  run.rg = u.rg;
  run.steps = 0;
  const bool gate_up = j.mode == kModeGateUp;
  // One token (TokenSlots): position s; gate_up reads the token's input,
  // down the position's h.
  run.p0 = u.s;
  run.ntok = 1;
  const int row = gate_up ? 0 : run.p0;
  run.inv = (gate_up ? j.buf.x_fp8_inv : j.buf.h_fp8_inv) +
            static_cast<int64_t>(row) * (j.ld_b / act_fp8::kBlock) + lane % 4;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt)
    acc[rt][0][0] = acc[rt][0][1] = acc[rt][0][2] = acc[rt][0][3] = 0.0f;
}

// Chunk q of this warp's kRT row tiles as wgmma A registers: per row tile,
// k32 step 0 (words 0, 1) and step 1 (words 2, 3).
template <int kRT, int kCPS>
__device__ __forceinline__ void DecodeChunk(const uint8_t* stage, int q,
                                            int lane,
                                            uint32_t (&a)[kRT][2][4]) {
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    const uint4 cw = *reinterpret_cast<const uint4*>(
        stage + (rt * kCPS + q) * tiled::kChunkBytes + lane * 16);
    tiled_e4m3::DecodeWord(cw.x, &a[rt][0][0], &a[rt][0][1]);
    tiled_e4m3::DecodeWord(cw.y, &a[rt][0][2], &a[rt][0][3]);
    tiled_e4m3::DecodeWord(cw.z, &a[rt][1][0], &a[rt][1][1]);
    tiled_e4m3::DecodeWord(cw.w, &a[rt][1][2], &a[rt][1][3]);
  }
}

// One unit of this warp: kCPS chunks of its kRT row tiles against the
// block's B bytes at shared address `b_addr`. acc[rt][0][0] / [2]: rows
// g / g + 8 of block c (this lane's), summed over the unit's chunks.
template <int kRT, int kCPS, int kMode>
__device__ __forceinline__ void ComputeFp8Unit(const uint8_t* stage,
                                               uint32_t b_addr, int ks,
                                               const Fp8Run& run,
                                               float (&acc)[kRT][1][4],
                                               int lane) {
  using S = Stage<kRT, kCPS>;
  // h's scales are written in this kernel (other blocks' gate_up): L2.
  float inv[kCPS];
#pragma unroll
  for (int q = 0; q < kCPS; ++q) {
    const float* at = run.inv + (ks * kCPS + q) * 4;
    inv[q] = kMode == kModeGateUp ? __ldg(at) : __ldcg(at);
  }
  uint2 sg[kRT][S::kGroups];
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
    for (int gi = 0; gi < S::kGroups; ++gi) {
      sg[rt][gi] = ScaleGroupAt<kRT, kCPS>(stage, rt, gi, lane);
    }
  }
  // Chunk q + 1 is decoded while chunk q's wgmmas run.
  uint32_t a[2][kRT][2][4];
  DecodeChunk<kRT, kCPS>(stage, 0, lane, a[0]);
#pragma unroll
  for (int q = 0; q < kCPS; ++q) {
    const uint64_t desc = BDescriptor(b_addr + q * act_fp8::kChunkBytes);
    float d[kRT][4] = {};
    WgmmaFence();
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
      Wgmma(d[rt], a[q % 2][rt][0], desc, 0);
      Wgmma(d[rt], a[q % 2][rt][1], desc + (256 >> 4), 1);
    }
    WgmmaCommit();
    if (q + 1 < kCPS)
      DecodeChunk<kRT, kCPS>(stage, q + 1, lane, a[(q + 1) % 2]);
    WgmmaWaitAll();
    // Units of < 4 chunks start inside a scale group.
    const int qs = kCPS < 4 ? (ks * kCPS + q) % 4 : q % 4;
#pragma unroll
    for (int rt = 0; rt < kRT; ++rt) {
      const float2 s =
          act_fp8::FromE4m3x2(ScaleOf(sg[rt][kCPS < 4 ? 0 : q / 4], qs));
      acc[rt][0][0] = fmaf(d[rt][0] + d[rt][1], s.x * inv[q], acc[rt][0][0]);
      acc[rt][0][2] = fmaf(d[rt][2] + d[rt][3], s.y * inv[q], acc[rt][0][2]);
    }
  }
}

// h_ready's counter of (slot s, down K step ks): one 128-byte line each, so
// that the polls and the epilogues' adds spread over L2 (RunBuffers sizes it
// for K steps of >= 64).
__device__ __forceinline__ int HReadyIndex(const MmaJob& j, int s, int ks) {
  return (s * (j.inter_local / 64) + ks) * kHReadyStride;
}

// h of one token for 2 row tiles (16 intermediate indices: one block) ->
// its B bytes and inverse scale, for down; then each block counted in its
// down K step's h_ready (released: down's blocks poll it).
template <int kRT, int kCPS>
__device__ void GateUpEpilogueFp8(const MmaJob& j, const Fp8Run& run,
                                  const float (&acc)[kRT][1][4], int lane) {
  const int g = lane / 4, c = lane % 4, blocks = j.inter_local / 16;
#pragma unroll
  for (int rt = 0; rt < kRT; rt += 2) {
    float h[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float gate = acc[rt + e][0][0] * j.out_scale;
      const float up = acc[rt + e][0][2] * j.out_scale;
      h[e] = gate / (1.0f + __expf(-gate)) * up;
    }
    float amax = fmaxf(fabsf(h[0]), fabsf(h[1]));
#pragma unroll
    for (int m = 4; m < 32; m *= 2)
      amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, m));
    float inv;
    const float scale = act_fp8::BlockScale(amax, &inv);
    uint32_t hi, lo;
    act_fp8::Split2(h[0] * scale, h[1] * scale, &hi, &lo);
    if (c != 0) continue;  // lanes c = 0 hold token 0's values
    const int block = (run.rg * kRT + rt) / 2;
    uint8_t* dst = j.buf.h_fp8 + static_cast<int64_t>(run.p0) * j.inter_local *
                                     act_fp8::kBytesPerValue;
    dst[act_fp8::BOffset(block, 0, g)] = static_cast<uint8_t>(hi);
    dst[act_fp8::BOffset(block, 0, 8 + g)] = static_cast<uint8_t>(hi >> 8);
    dst[act_fp8::BOffset(block, 1, g)] = static_cast<uint8_t>(lo);
    dst[act_fp8::BOffset(block, 1, 8 + g)] = static_cast<uint8_t>(lo >> 8);
    if (g == 0)
      j.buf.h_fp8_inv[static_cast<int64_t>(run.p0) * blocks + block] = inv;
  }
  __syncwarp();
  if (lane != 0) return;
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
#pragma unroll
  for (int rt = 0; rt < kRT; rt += 2) {
    const int block = (run.rg * kRT + rt) / 2;
    atomicAdd(j.buf.h_ready + HReadyIndex(j, run.p0, block / (4 * kCPS)), 1);
  }
}

// y += the slot's routing weight x down's rows (one token; lanes c = 0).
template <int kRT>
__device__ void DownEpilogueFp8(const MmaJob& j, const Fp8Run& run,
                                const float (&acc)[kRT][1][4], float weight,
                                int lane) {
  if (lane % 4 != 0) return;
  const float w = weight * j.out_scale;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    const int r = (run.rg * kRT + rt) * tiled::kTileRows + lane / 4;
    atomicAdd(j.buf.y + r, w * acc[rt][0][0]);
    atomicAdd(j.buf.y + r + 8, w * acc[rt][0][2]);
  }
}

// The row sums (over the 4 lanes' blocks) into lane c = 0's acc[rt][0][0]
// and [2], the layout fused_gemv's partial-sum and down epilogues read for
// token 0; then as fused_gemv's Flush.
template <int kRT, int kCPS, int kMode>
__device__ void FlushFp8(const MmaJob& j, const TokenSlots& slots,
                         Fp8Run& run, float (&acc)[kRT][1][4], int steps_total,
                         int rgs, int lane) {
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
#pragma unroll
    for (int r = 0; r < 4; r += 2) {
      float v = acc[rt][0][r];
      v += __shfl_xor_sync(~0u, v, 1);
      v += __shfl_xor_sync(~0u, v, 2);
      acc[rt][0][r] = v;
    }
  }
  if (kMode == kModeGateUp) {
    if (run.steps < steps_total &&
        !AddPartials<kRT, 1>(j, run, acc, steps_total, rgs, lane)) {
      return;
    }
    GateUpEpilogueFp8<kRT, kCPS>(j, run, acc, lane);
  } else {
    DownEpilogueFp8<kRT>(j, run, acc, slots.weight[run.s], lane);
  }
}

// This warp's weights of unit `u` (its row group) of `expert` into `dst`:
// per row tile one bulk copy of its kCPS code chunks and one of their scale
// groups (both contiguous in the tiled layout). Lane 0.
template <int kRT, int kCPS>
__device__ void BulkWeights(const MmaJob& j, const Cursor& u, int expert,
                            uint8_t* dst, uint64_t* bar) {
  using S = Stage<kRT, kCPS>;
  const int kc0 = u.ks * kCPS;
  const uint8_t* codes = j.w.codes + expert * j.w.code_stride;
  const uint8_t* scales = j.w.scales + expert * j.w.scale_stride;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    const int row_tile = u.rg * kRT + rt;
    BulkCopy(dst + rt * kCPS * tiled::kChunkBytes,
             codes + tiled::CodeOffset(row_tile, kc0, 0, j.w.chunks),
             kCPS * tiled::kChunkBytes, bar);
    BulkCopy(
        dst + S::kCodeBytes + rt * S::kGroups * tiled::kScaleGroupBytes,
        scales + tiled::ScaleOffset(
                     row_tile, kc0 / tiled::kGroupChunks * tiled::kGroupChunks,
                     0, j.w.groups),
        S::kGroups * tiled::kScaleGroupBytes, bar);
  }
}

// The B bytes of slot s: the token's input (gate_up) or the position's h.
__device__ __forceinline__ const uint8_t* RowB(const MmaJob& j, int s) {
  if (j.mode == kModeGateUp) return j.buf.x_fp8;
  return j.buf.h_fp8 +
         static_cast<int64_t>(s) * j.ld_b * act_fp8::kBytesPerValue;
}

// Until every router block has counted its scores (and x_fp8) as written,
// then acquire them (x_fp8 for the bulk copies: the async proxy). One warp;
// lane 0 polls with a pause so that 264 blocks' polls do not crowd the L2
// slice the router's blocks write.
__device__ void WaitForScores(const Fp8Layer& job) {
  if (threadIdx.x % 32 == 0) {
    for (;;) {
      int n;
      asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n"
                   : "=r"(n)
                   : "l"(job.buf().scores_written)
                   : "memory");
      if (n >= job.route.router_blocks) break;
      __nanosleep(128);
    }
  }
  __syncwarp();
  asm volatile("fence.acq_rel.gpu;\nfence.proxy.async.global;\n" ::: "memory");
}

// The token's picks, this rank's slots and their routing weights
// (TokenSlots) from the router's scores, exactly as the router's tail picks
// them (WarpTopK on the same floats) and weighs them (score / the picks'
// sum in pick order x scaling). One warp; L2 reads.
__device__ void RouteOneToken(const Fp8Layer& job,
                              const float (&bias)[kTopKPerLane],
                              TokenSlots& out) {
  const OneTokenRouting& r = job.route;
  const int lane = threadIdx.x % 32;
  float score[kTopKPerLane];
  uint32_t key[kTopKPerLane];
#pragma unroll
  for (int i = 0; i < kTopKPerLane; ++i) {
    const int e = lane + 32 * i;
    score[i] = e < r.experts ? __ldcg(job.buf().logits + e) : 0.0f;
    key[i] = e < r.experts ? OrderedKey(score[i] + bias[i]) : 0;
  }
  const uint32_t taken =
      WarpTopK(key, score, r.top_k, [&](int pick, int e, float v) {
        out.pick_e[pick] = e;
        out.pick_s[pick] = v;
      });
  __syncwarp();
  float sum = 0.0f;
  for (int k = 0; k < r.top_k; ++k) sum += out.pick_s[k];
  int below = 0;  // owned picks of lower index
#pragma unroll
  for (int i = 0; i < kTopKPerLane; ++i) {
    const int e = lane + 32 * i;
    const bool owned = ((taken >> i) & 1u) && e >= r.e_lo && e < r.e_hi;
    const uint32_t m = __ballot_sync(~0u, owned);
    if (owned) {
      const int slot = r.has_shared + below + __popc(m & ((1u << lane) - 1));
      out.expert[slot] = e - r.e_lo;
      out.weight[slot] = score[i] / sum * r.scaling;
    }
    below += __popc(m);
  }
  if (lane == 0) {
    if (r.has_shared) {
      out.expert[0] = r.shared_index;
      out.weight[0] = 1.0f;
    }
    out.count = r.has_shared + below;
  }
  __syncwarp();
}

// What the router's tail writes for other readers (the runner reads meta;
// nothing in this kernel reads them), from the routing: one token,
// position = slot. Warp 0 of block 0.
__device__ void WriteOneTokenTables(const Fp8Layer& job, const TokenSlots& t) {
  const OneTokenRouting& r = job.route;
  const RunBuffers& b = job.buf();
  const int lane = threadIdx.x % 32;
  for (int k = lane; k < r.top_k; k += 32) {
    const int e = t.pick_e[k];
    int pos = -1;
    if (e >= r.e_lo && e < r.e_hi) {
      pos = r.has_shared;  // + owned picks of lower index
      for (int q = 0; q < r.top_k; ++q) {
        const int f = t.pick_e[q];
        pos += f >= r.e_lo && f < e ? 1 : 0;
      }
      b.tok_list[pos] = 0;
      b.tok_w[pos] = t.weight[pos];
    }
    b.topk_idx[k] = e;
    b.topk_w[k] = pos >= 0 ? t.weight[pos] : 0.0f;
    b.tok_pos[k] = pos;
  }
  for (int s = lane; s < t.count; s += 32) {
    b.slot_expert[s] = t.expert[s];
    b.slot_tok_off[s] = s;
    b.slot_ntok[s] = 1;
    b.tile_prefix[s] = s;
  }
  if (lane == 0) {
    b.tile_prefix[t.count] = t.count;
    b.meta[kMetaSlots] = t.count;
    b.meta[kMetaRouted] = t.count - r.has_shared;
    b.meta[kMetaPositions] = t.count;
    b.meta[kMetaTiles] = t.count;
    b.tok_pos[r.top_k] = r.has_shared ? 0 : -1;  // the shared expert's
    if (r.has_shared) {
      b.tok_list[0] = 0;
      b.tok_w[0] = 1.0f;
    }
  }
}

// Until gate_up's epilogues have written every h block of down's K step ks
// of slot s (h_ready), read with acquire; then the bulk copy may read them
// (async proxy). One thread.
__device__ void WaitForH(const MmaJob& j, int s, int ks, int blocks_per_step) {
  const int* ready = j.buf.h_ready + HReadyIndex(j, s, ks);
  for (;;) {
    int n;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n"
                 : "=r"(n)
                 : "l"(ready)
                 : "memory");
    if (n >= blocks_per_step) break;
    __nanosleep(256);
  }
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// The copies of a block's ring: unit i's weights (lane 0 of each warp: its
// row group) and B bytes (lane 0 of warp 0) into stage (base + i) % kCount
// by TMA bulk copies, completing on the stage's mbarrier (one arrival a
// warp). Units are taken in order, one call each; `base` continues the
// ring's count from gate_up into down, so stages and phases run on.
template <int kRT, int kCPS>
struct Fp8Copies {
  using S = Stage<kRT, kCPS>;
  using F = Fp8Stage<kRT, kCPS>;
  const MmaJob& j;
  const StreamKSeq& seq;
  uint8_t* smem;
  uint64_t* full;
  const int* slot_expert;  // TokenSlots::expert
  int base, warp, lane;
  Cursor w_at, b_at;
  int w_left = 0, b_left = 0, w_s = -1, w_expert = 0, b_s = -1;
  const uint8_t* b_row = nullptr;
  uint32_t h_seen = 0;  // down: K steps of slot b_s whose h is known written

  __device__ uint8_t* StageAt(int i) const {
    return smem + ((base + i) % F::kCount) * F::kBytes;
  }
  __device__ uint64_t* BarAt(int i) const {
    return full + (base + i) % F::kCount;
  }
  __device__ void Weights(int i) {
    seq.Advance(i, w_at, w_left);
    if (w_at.s != w_s) {
      w_s = w_at.s;
      w_expert = slot_expert[w_s];
    }
    if (lane != 0) return;
    uint64_t* bar = BarAt(i);
    MbarArriveExpectTx(bar, S::kBytes + (warp == 0 ? F::kB : 0));
    Cursor mine = w_at;
    mine.rg = w_at.rg * kWarps + warp;
    BulkWeights<kRT, kCPS>(j, mine, w_expert, StageAt(i) + warp * S::kBytes,
                           bar);
  }
  // down's B (h) only once gate_up has written it.
  __device__ void B(int i) {
    seq.Advance(i, b_at, b_left);
    if (warp != 0 || lane != 0) return;
    if (b_at.s != b_s) {
      b_s = b_at.s;
      b_row = RowB(j, b_s);
      h_seen = 0;
    }
    if (j.mode == kModeDown && !((h_seen >> b_at.ks) & 1u)) {
      WaitForH(j, b_at.s, b_at.ks, 4 * kCPS);
      h_seen |= 1u << b_at.ks;
    }
    BulkCopy(StageAt(i) + kWarps * S::kBytes,
             b_row + b_at.ks * kCPS * act_fp8::kChunkBytes, F::kB, BarAt(i));
  }
};

// The block's stream-K units of one matrix: warp w's row group of unit
// (s, wrg, ks) is wrg * kWarps + w. A stage is refilled only after its
// unit's last wgmma: a warpgroup op, so every warp has read its weights and
// the block's B by then; no block barrier. Returns the ring's count after.
template <int kRT, int kCPS, int kMode>
__device__ __forceinline__ int RunFp8Units(const MmaJob& j,
                                           const TokenSlots& slots, int base,
                                           uint8_t* smem, uint64_t* full,
                                           int warp, int lane) {
  using S = Stage<kRT, kCPS>;
  constexpr int kStages = Fp8Stage<kRT, kCPS>::kCount;
  // Row groups of the block (kWarps x kRT row tiles) and K steps.
  const int rgs_block = j.w.rows / tiled::kTileRows / kRT / kWarps;
  const int steps = j.w.chunks / kCPS;
  const StreamKSeq seq{WarpRange(slots.count * rgs_block * steps, gridDim.x,
                                 blockIdx.x, j.round_units),
                       0, rgs_block * steps, rgs_block, steps};
  const int count = seq.Count();
  const int rgs = seq.rgs * kWarps;  // per-warp row groups, for the counters
  Fp8Copies<kRT, kCPS> copies{j,    seq,  smem, full, slots.expert,
                              base, warp, lane};
  for (int i = 0; i < kStages - 1 && i < count; ++i) copies.Weights(i);
  for (int i = 0; i < kStages - 1 && i < count; ++i) copies.B(i);
  Fp8Run run;
  float acc[kRT][1][4];
  Cursor cur;
  int cur_left = 0;
  for (int i = 0; i < count; ++i) {
    if (i + kStages - 1 < count) {
      copies.Weights(i + kStages - 1);
      copies.B(i + kStages - 1);
    }
    seq.Advance(i, cur, cur_left);
    Cursor mine = cur;
    mine.rg = cur.rg * kWarps + warp;
    if (mine.s != run.s || mine.rg != run.rg) {
      if (run.s >= 0) {
        FlushFp8<kRT, kCPS, kMode>(j, slots, run, acc, seq.steps, rgs, lane);
      }
      StartFp8Run<kRT>(j, mine, run, acc, lane);
    }
    ++run.steps;
    MbarWait(copies.BarAt(i), ((base + i) / kStages) & 1);
    uint8_t* stage = copies.StageAt(i);
    ComputeFp8Unit<kRT, kCPS, kMode>(stage + warp * S::kBytes,
                                     SmemAddr(stage + kWarps * S::kBytes),
                                     cur.ks, run, acc, lane);
  }
  if (run.s >= 0) {
    FlushFp8<kRT, kCPS, kMode>(j, slots, run, acc, seq.steps, rgs, lane);
  }
  return base + count;
}

// down's units, taken one at a time from a counter in slot order (h of the
// early slots is complete first), so that blocks that finish gate_up early
// take more of them and the late ones fewer (a static split ended with the
// slowest gate_up block: device run 57). Lane 0 of warp 0 produces for the
// whole block: it takes a unit (one ahead, the add in flight while the ring
// fills), waits for its h, records it for the stage and issues every warp's
// weight copies and the B copy; past the last unit it records -1. Each unit
// is its own run (y takes its partial rows by atomics).
template <int kRT, int kCPS>
struct DownProducer {
  using S = Stage<kRT, kCPS>;
  using F = Fp8Stage<kRT, kCPS>;
  const MmaJob& j;
  const TokenSlots& slots;
  uint8_t* smem;
  uint64_t* full;
  int* stage_unit;
  int total, rgs_block, steps;
  int pending = 0, h_slot = -1;
  uint32_t h_seen = 0;

  __device__ void Fill(int r) {
    const int u = pending;
    if (u < total) pending = atomicAdd(j.buf.down_next, 1);
    uint64_t* bar = full + r % F::kCount;
    uint8_t* stage = smem + (r % F::kCount) * F::kBytes;
    if (u >= total) {
      stage_unit[r % F::kCount] = -1;
      MbarArrive(bar, kWarps);
      return;
    }
    Cursor c;
    c.s = u / (rgs_block * steps);
    c.rg = u % (rgs_block * steps) / steps;
    c.ks = u % steps;
    if (c.s != h_slot) h_slot = c.s, h_seen = 0;
    if (!((h_seen >> c.ks) & 1u)) {
      WaitForH(j, c.s, c.ks, 4 * kCPS);
      h_seen |= 1u << c.ks;
    }
    stage_unit[r % F::kCount] = u;
    MbarArriveExpectTx(bar, kWarps * S::kBytes + F::kB);
    MbarArrive(bar, kWarps - 1);
    const int expert = slots.expert[c.s];
    for (int w = 0; w < kWarps; ++w) {
      Cursor mine = c;
      mine.rg = c.rg * kWarps + w;
      BulkWeights<kRT, kCPS>(j, mine, expert, stage + w * S::kBytes, bar);
    }
    BulkCopy(stage + kWarps * S::kBytes,
             RowB(j, c.s) + c.ks * kCPS * act_fp8::kChunkBytes, F::kB, bar);
  }
};

template <int kRT, int kCPS>
__device__ __forceinline__ void RunDownDynamic(const MmaJob& j,
                                               const TokenSlots& slots,
                                               int base, uint8_t* smem,
                                               uint64_t* full, int warp,
                                               int lane) {
  using S = Stage<kRT, kCPS>;
  constexpr int kStages = Fp8Stage<kRT, kCPS>::kCount;
  __shared__ int stage_unit[kStages];
  const int rgs_block = j.w.rows / tiled::kTileRows / kRT / kWarps;
  const int steps = j.w.chunks / kCPS;
  const bool producer = warp == 0 && lane == 0;
  DownProducer<kRT, kCPS> prod{j,    slots, smem, full, stage_unit,
                               slots.count * rgs_block * steps, rgs_block,
                               steps};
  if (producer) {
    prod.pending = atomicAdd(j.buf.down_next, 1);
    for (int f = 0; f < kStages - 1; ++f) prod.Fill(base + f);
  }
  Fp8Run run;
  float acc[kRT][1][4];
  for (int k = 0;; ++k) {
    // The stage of unit k - 1: every warp is past its last wgmma.
    if (producer) prod.Fill(base + k + kStages - 1);
    const int r = base + k;
    MbarWait(full + r % kStages, (r / kStages) & 1);
    const int u = stage_unit[r % kStages];
    if (u < 0) break;
    Cursor c;
    c.s = u / (rgs_block * steps);
    c.rg = (u % (rgs_block * steps) / steps) * kWarps + warp;
    c.ks = u % steps;
    StartFp8Run<kRT>(j, c, run, acc, lane);
    run.steps = 1;
    uint8_t* stage = smem + (r % kStages) * Fp8Stage<kRT, kCPS>::kBytes;
    ComputeFp8Unit<kRT, kCPS, kModeDown>(stage + warp * S::kBytes,
                                         SmemAddr(stage + kWarps * S::kBytes),
                                         c.ks, run, acc, lane);
    FlushFp8<kRT, kCPS, kModeDown>(j, slots, run, acc, steps, 0, lane);
  }
}

// Each block's routing (warp 0): the bias (an input) loads while the router
// runs; block 0 writes the tables; the last block to route zeroes the
// counters for the next run (every block has polled by then).
__device__ void RouteBlock(const Fp8Layer& job, TokenSlots& slots) {
  if (threadIdx.x / 32 == 0) {
    float bias[kTopKPerLane];
#pragma unroll
    for (int i = 0; i < kTopKPerLane; ++i) {
      const int e = threadIdx.x + 32 * i;
      bias[i] = e < job.route.experts ? __ldg(job.buf().bias + e) : 0.0f;
    }
    WaitForScores(job);
    if (threadIdx.x == 0) TL_MAX(job.buf(), 2);
    RouteOneToken(job, bias, slots);
    if (threadIdx.x == 0) TL_MAX(job.buf(), 3);
    if (blockIdx.x == 0) WriteOneTokenTables(job, slots);
    if (threadIdx.x == 0) {
      const int n = atomicAdd(job.buf().blocks_routed, 1);
      if (n == static_cast<int>(gridDim.x) - 1) {
        *job.buf().blocks_routed = 0;
        *job.buf().scores_written = 0;
      }
    }
  }
  __syncthreads();
}

// One token's experts in one launch: route, gate_up's units, then down's
// (stream-K over this rank's slots, each over the whole grid). down's units
// wait only for the h blocks they read (h_ready), not for all of gate_up.
template <int kRT, int kCPS>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    Fp8LayerKernel(const __grid_constant__ Fp8Layer job) {
  using F = Fp8Stage<kRT, kCPS>;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ TokenSlots slots;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + F::kCount * F::kBytes);
  if (threadIdx.x == 0) {
    for (int k = 0; k < F::kCount; ++k) MbarInit(full + k, kWarps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  const int w = blockIdx.x * kWarps + warp;  // for the timeline probes
  TL_GATE_UP_START(job.buf(), w, lane);
  RouteBlock(job, slots);
  TL_GATE_UP_RELEASED(job.buf(), w, lane);
  // Each matrix's job is its own grid constant (constant-bank reads in the
  // loops: a runtime choice between the two made them generic loads,
  // device run 56).
  const int ring = RunFp8Units<kRT, kCPS, kModeGateUp>(job.gate_up, slots, 0,
                                                       smem, full, warp, lane);
  if (lane == 0) {
    TL_MAX(job.buf(), 9);
    TL_WARP(job.buf(), w, 3);
    TL_MIN(job.buf(), 10);
  }
  RunDownDynamic<kRT, kCPS>(job.down, slots, ring, smem, full, warp, lane);
  // The router grid ends before this one (nothing here needs more of it).
  GridDependencyWait();
  if (lane == 0) TL_MAX(job.buf(), 11);
  (void)w;
}

template <int kRT, int kCPS>
GpuStatus LaunchTile(const LayerArgs& a, cudaStream_t stream) {
  using F = Fp8Stage<kRT, kCPS>;
  constexpr int kSmem = F::kCount * F::kBytes + F::kCount * 8;  // + mbarriers
  static int blocks_per_sm[64] = {};
  auto* kernel = &Fp8LayerKernel<kRT, kCPS>;
  int per_sm = 0;
  MG_RETURN_IF_ERROR(BlocksPerSm(kernel, kWarps * 32, kSmem, a.device,
                                 blocks_per_sm, "fused_gemv_fp8", &per_sm));
  Fp8Layer job;
  job.gate_up = LayerJob(a, true, tiled_e4m3::kDecodeScale);
  job.down = LayerJob(a, false, tiled_e4m3::kDecodeScale);
  job.pdl = job.gate_up.pdl;
  const Geometry& g = a.geo;
  job.route = {g.experts,    g.top_k,     g.scaling,     g.e_lo,
               g.e_hi,       g.has_shared, g.num_local, RouterBlocks(g)};
  // Every block must be resident at once: down's units wait on other
  // blocks' gate_up epilogues (one launch a layer, sized to the occupancy).
  return LaunchJob(kernel, job, a.sm_count * per_sm, kWarps * 32, kSmem,
                   stream);
}

GpuStatus CanImplement(const LayerArgs& a) {
  MG_RETURN_IF_ERROR(CheckTile(a, "fused_gemv_fp8"));
  if (a.geo.batch != 1) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_fp8 runs one token (its FP8 mma columns carry one "
                "token's four scale blocks); batch is " +
                    std::to_string(a.geo.batch) + " (use fused_gemv)");
  }
  if (a.geo.hidden % a.block_k != 0 || a.geo.inter_local % a.block_k != 0) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_fp8 tile " + std::to_string(a.block_n) + "x" +
                    std::to_string(a.block_k) +
                    ": block_k must divide hidden " +
                    std::to_string(a.geo.hidden) + " and moe_inter / tp " +
                    std::to_string(a.geo.inter_local));
  }
  return CheckTiledDims(a, a.block_n, "fused_gemv_fp8");
}

size_t WorkspaceBytes(const LayerArgs&) { return 0; }

GpuStatus Launch(const LayerArgs& args, void*, cudaStream_t stream) {
  LayerArgs a = args;
  a.router_for_one_token_fp8 = true;
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
#define MOETUNE_FP8_LAUNCH(n, k)            \
  if (a.block_n == (n) && a.block_k == (k)) \
    return LaunchTile<(n) / 16 / kWarps, (k) / 64>(a, stream);
  MOETUNE_FUSED_GEMV_FP8_TILES(MOETUNE_FP8_LAUNCH)
#undef MOETUNE_FP8_LAUNCH
  return Fail(RunStatus::kCannotImplement, "fused_gemv_fp8: unknown tile");
}

}  // namespace

const BackendOps& FusedGemvFp8Ops() {
  static const BackendOps ops{"fused_gemv_fp8",
                              true,
                              true,
                              &CanImplement,
                              &WorkspaceBytes,
                              &Launch,
                              WeightLayout::kE4m3Bits};
  return ops;
}

}  // namespace moetune::gpu
