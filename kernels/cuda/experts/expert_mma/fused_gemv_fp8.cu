// fused_gemv_fp8: fused_gemv's schedule (router, ONE stream-K gate_up launch
// for every active expert, ONE for down) for a single token on Hopper's FP8
// tensor cores: the weights decoded to E4M3 in registers (tiled_e4m3.h: 5
// integer operations per 8 weights) and multiplied by
// wgmma.m64n8k32.f32.e4m3.e4m3 (A from registers, B from shared memory).
// mma.sync with e4m3 is no FP8 instruction on sm_90 (it unpacks to fp16 and
// runs two HMMA.16816; kernels/cuda/moe/PERF.md); only wgmma is.
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
// depth follows from a fixed budget of shared memory per block
// (kernels/cuda/moe/PERF.md has the figures). gate_up waits for the router
// before streaming (its B is the router's output); down issues its first
// weight copies before waiting for gate_up, as in fused_gemv.
#include <string>

#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/base/act_fp8.cuh"
#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/experts/expert_mma/expert_mma_impl.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"
#include "kernels/cuda/moe/tiled_e4m3.h"

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
  // The K step's activation inverse scales (4 blocks a chunk), after B;
  // their slot rounded to 128 bytes so that every stage's B stays aligned.
  static constexpr int kInv = kCPS * 4 * sizeof(float);
  static constexpr int kInvSlot = (kInv + 127) / 128 * 128;
  static constexpr int kBytes = kWarps * S::kBytes + kB + kInvSlot;
  static constexpr int kRaw = kRingBytesPerBlock / kBytes;
  static constexpr int kCount = kRaw < 2 ? 2 : kRaw > 8 ? 8 : kRaw;
};

// The current (slot, row group) of this warp (its activations and their
// inverse scales come through the ring, so Run's B pointers stay unused).
using Fp8Run = Run<1>;

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
// matrices 128 bytes apart along K, one along N (its stride unused).
__device__ __forceinline__ uint64_t BDescriptor(uint32_t addr) {
  return NoSwizzleDescriptor<128, 256>(addr);
}
template <int kRT>
__device__ void StartFp8Run(const MmaJob& j, const Cursor& u, Fp8Run& run,
                            float (&acc)[kRT][1][4]) {
  run.s = u.s;
  run.rg = u.rg;
  run.steps = 0;
  run.p0 = __ldg(j.buf.slot_tok_off + u.s);
  run.ntok = __ldg(j.buf.slot_ntok + u.s);
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
// block's B bytes at shared address `b_addr` and their inverse scales at
// `b_inv` (chunk q's block c at [4 q + c]). acc[rt][0][0] / [2]: rows
// g / g + 8 of block c (this lane's), summed over the unit's chunks.
template <int kRT, int kCPS>
__device__ __forceinline__ void ComputeFp8Unit(const uint8_t* stage,
                                               uint32_t b_addr,
                                               const float* b_inv, int ks,
                                               float (&acc)[kRT][1][4],
                                               int lane) {
  using S = Stage<kRT, kCPS>;
  float inv[kCPS];
#pragma unroll
  for (int q = 0; q < kCPS; ++q) inv[q] = b_inv[4 * q + lane % 4];
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

// h of one token for 2 row tiles (16 intermediate indices: one block) ->
// its B bytes and inverse scale, for down.
template <int kRT>
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
}

// The row sums (over the 4 lanes' blocks) into lane c = 0's acc[rt][0][0]
// and [2], the layout fused_gemv's partial-sum and down epilogues read for
// token 0; then as fused_gemv's Flush.
template <int kRT, int kMode>
__device__ void FlushFp8(const MmaJob& j, Fp8Run& run, float (&acc)[kRT][1][4],
                         int steps_total, int rgs, int lane) {
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
    GateUpEpilogueFp8<kRT>(j, run, acc, lane);
  } else {
    DownEpilogue<kRT, 1, true>(j, run, acc, lane);
  }
}

// This warp's weights of unit `u` (its row group) of `expert` into `dst`:
// per row tile one bulk copy of its kCPS code chunks and one of their scale
// groups (both contiguous in the tiled layout). Lane 0.
template <int kRT, int kCPS>
__device__ void BulkWeights(const MmaJob& j, const Cursor& u, int expert,
                            uint8_t* dst, uint64_t* bar, uint64_t policy) {
  using S = Stage<kRT, kCPS>;
  const int kc0 = u.ks * kCPS;
  const uint8_t* codes = j.w.codes + expert * j.w.code_stride;
  const uint8_t* scales = j.w.scales + expert * j.w.scale_stride;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    const int row_tile = u.rg * kRT + rt;
    BulkCopyWithPolicy(dst + rt * kCPS * tiled::kChunkBytes,
                       codes + tiled::CodeOffset(row_tile, kc0, 0, j.w.chunks),
                       kCPS * tiled::kChunkBytes, bar, policy);
    BulkCopyWithPolicy(
        dst + S::kCodeBytes + rt * S::kGroups * tiled::kScaleGroupBytes,
        scales + tiled::ScaleOffset(
                     row_tile, kc0 / tiled::kGroupChunks * tiled::kGroupChunks,
                     0, j.w.groups),
        S::kGroups * tiled::kScaleGroupBytes, bar, policy);
  }
}

// The B bytes (token input or position h) of slot s, and their inverse
// scales (one a block of 16). One token (CanImplement): its input is row 0,
// and the router gives slot s position s (one position a slot, in slot
// order), so no table is read on the way to a stage's first copy.
__device__ __forceinline__ const uint8_t* RowB(const MmaJob& j, int s,
                                               const float** inv) {
  const bool gate_up = j.mode == kModeGateUp;
  const int64_t row = gate_up ? 0 : s;
  *inv = (gate_up ? j.buf.x_fp8_inv : j.buf.h_fp8_inv) +
         row * (j.ld_b / act_fp8::kBlock);
  return (gate_up ? j.buf.x_fp8 : j.buf.h_fp8) +
         row * j.ld_b * act_fp8::kBytesPerValue;
}

// The copies of a block's ring: unit i's weights (lane 0 of each warp: its
// row group) and B bytes (lane 0 of warp 0) into stage i % kCount by TMA
// bulk copies, completing on the stage's mbarrier (one arrival a warp).
// Units are taken in order, one call each.
template <int kRT, int kCPS>
struct Fp8Copies {
  using S = Stage<kRT, kCPS>;
  using F = Fp8Stage<kRT, kCPS>;
  const MmaJob& j;
  const StreamKSeq& seq;
  uint8_t* smem;
  uint64_t* full;
  int warp, lane;
  int lane_expert;  // slot `lane`'s expert (read with the slot count)
  uint64_t policy = EvictFirstPolicy();  // for the weights
  Cursor w_at, b_at;
  int w_left = 0, b_left = 0, w_s = -1, w_expert = 0, b_s = -1;
  const uint8_t* b_row = nullptr;
  const float* b_inv = nullptr;

  __device__ uint8_t* StageAt(int i) const {
    return smem + (i % F::kCount) * F::kBytes;
  }
  __device__ void Weights(int i) {
    seq.Advance(i, w_at, w_left);
    if (w_at.s != w_s) {
      w_s = w_at.s;
      w_expert = w_s < 32 ? __shfl_sync(~0u, lane_expert, w_s)
                          : SlotSource<false, true>{&j, 0}.Expert(w_s);
    }
    if (lane != 0) return;
    uint64_t* bar = full + i % F::kCount;
    MbarArriveExpectTx(bar, S::kBytes + (warp == 0 ? F::kB + F::kInv : 0));
    Cursor mine = w_at;
    mine.rg = w_at.rg * kWarps + warp;
    BulkWeights<kRT, kCPS>(j, mine, w_expert, StageAt(i) + warp * S::kBytes,
                           bar, policy);
  }
  // The slot's B row is looked up once a slot (two dependent L2 loads).
  __device__ void B(int i) {
    seq.Advance(i, b_at, b_left);
    if (warp != 0 || lane != 0) return;
    if (b_at.s != b_s) {
      b_s = b_at.s;
      b_row = RowB(j, b_s, &b_inv);
    }
    BulkCopy(StageAt(i) + kWarps * S::kBytes,
             b_row + b_at.ks * kCPS * act_fp8::kChunkBytes, F::kB,
             full + i % F::kCount);
    BulkCopy(StageAt(i) + kWarps * S::kBytes + F::kB,
             b_inv + b_at.ks * kCPS * 4, F::kInv, full + i % F::kCount);
  }
};

// The block's stream-K units: warp w's row group of unit (s, wrg, ks) is
// wrg * kWarps + w. A stage is refilled only after its unit's last wgmma:
// a warpgroup op, so every warp has read its weights and the block's B by
// then; no block barrier. kPreWait: the first weight copies go out before
// waiting for the previous kernel (B depends on it).
template <int kRT, int kCPS, int kMode, bool kPreWait>
__device__ void RunFp8Units(const MmaJob& j, const StreamKSeq& seq,
                            uint8_t* smem, uint64_t* full, int warp, int lane,
                            int lane_expert) {
  using S = Stage<kRT, kCPS>;
  using F = Fp8Stage<kRT, kCPS>;
  constexpr int kStages = F::kCount;
  const int count = seq.Count();
  const int rgs = seq.rgs * kWarps;  // per-warp row groups, for the counters
  Fp8Copies<kRT, kCPS> copies{j, seq, smem, full, warp, lane, lane_expert};
  for (int i = 0; i < kStages - 1 && i < count; ++i) copies.Weights(i);
  if (kPreWait) {
    GridDependencyWait();
    LaunchDependents();
  }
  for (int i = 0; i < kStages - 1 && i < count; ++i) copies.B(i);
  Fp8Run run;
  float acc[kRT][1][4];
  Cursor cur;
  int cur_left = 0;
  // One pass past the last unit flushes the last run: the flush (partial
  // sums, epilogue) has one call site, so the loop's code stays short.
  for (int i = 0;; ++i) {
    const bool more = i < count;
    Cursor mine;  // this warp's unit; read only when there is one
    if (more) {
      if (i + kStages - 1 < count) {
        copies.Weights(i + kStages - 1);
        copies.B(i + kStages - 1);
      }
      seq.Advance(i, cur, cur_left);
      mine = cur;
      mine.rg = cur.rg * kWarps + warp;
    }
    if (!more || mine.s != run.s || mine.rg != run.rg) {
      if (run.s >= 0) FlushFp8<kRT, kMode>(j, run, acc, seq.steps, rgs, lane);
      if (!more) break;
      StartFp8Run<kRT>(j, mine, run, acc);
    }
    ++run.steps;
    MbarWait(full + i % kStages, (i / kStages) & 1);
    uint8_t* stage = copies.StageAt(i);
    ComputeFp8Unit<kRT, kCPS>(
        stage + warp * S::kBytes, SmemAddr(stage + kWarps * S::kBytes),
        reinterpret_cast<const float*>(stage + kWarps * S::kBytes + F::kB),
        cur.ks, acc, lane);
  }
}

template <int kRT, int kCPS, int kMode>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    Fp8ExpertKernel(const __grid_constant__ MmaJob job) {
  using F = Fp8Stage<kRT, kCPS>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + F::kCount * F::kBytes);
  if (threadIdx.x == 0) {
    for (int k = 0; k < F::kCount; ++k) MbarInit(full + k, kWarps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // Row groups of the block (kWarps x kRT row tiles) and K steps.
  const int rgs = job.w.rows / tiled::kTileRows / kRT / kWarps;
  const int steps = job.w.chunks / kCPS;
  const int per_slot = rgs * steps;
  if (kMode == kModeGateUp) {
    // Every slot, the shared expert's too, needs the router's x_fp8.
    GridDependencyWait();
    LaunchDependents();
  }
  // down: gate_up started its dependents only after the router finished, so
  // the slot count is final (read through L2); with it, in the same round
  // trip, slot `lane`'s expert (the slot table has room for 32, AllocRun).
  const int units = __ldcg(job.buf.meta + kMetaSlots) * per_slot;
  const int lane_expert = __ldcg(job.buf.slot_expert + lane);
  const StreamKSeq seq{WarpRange(units, gridDim.x, blockIdx.x, job.round_units),
                       0, per_slot, rgs, steps};
  RunFp8Units<kRT, kCPS, kMode, kMode == kModeDown>(job, seq, smem, full, warp,
                                                    lane, lane_expert);
}

template <int kRT, int kCPS, int kMode>
GpuStatus LaunchFp8(const MmaJob& job, int device, int sm_count,
                    cudaStream_t stream) {
  using F = Fp8Stage<kRT, kCPS>;
  constexpr int kSmem = F::kCount * F::kBytes + F::kCount * 8;  // + mbarriers
  static int blocks_per_sm[64] = {};
  auto* kernel = &Fp8ExpertKernel<kRT, kCPS, kMode>;
  int per_sm = 0;
  MG_RETURN_IF_ERROR(BlocksPerSm(kernel, kWarps * 32, kSmem, device,
                                 blocks_per_sm, "fused_gemv_fp8", &per_sm));
  return LaunchJob(kernel, job, sm_count * per_sm, kWarps * 32, kSmem, stream);
}

template <int kRT, int kCPS>
GpuStatus LaunchTile(const LayerArgs& a, cudaStream_t stream) {
  const float decode = tiled_e4m3::kDecodeScale;
  MG_RETURN_IF_ERROR((LaunchFp8<kRT, kCPS, kModeGateUp>(
      LayerJob(a, true, decode), a.device, a.sm_count, stream)));
  return LaunchFp8<kRT, kCPS, kModeDown>(LayerJob(a, false, decode), a.device,
                                         a.sm_count, stream);
}

GpuStatus Launch(const LayerArgs& args, void*, cudaStream_t stream) {
  LayerArgs a = args;
  a.router_writes_x_fp8 = true;
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
#define MOETUNE_FP8_LAUNCH(n, k)          \
  if (a.tile == backends::Tile{(n), (k)}) \
    return LaunchTile<(n) / 16 / kWarps, (k) / 64>(a, stream);
  MOETUNE_FUSED_GEMV_FP8_TILES(MOETUNE_FP8_LAUNCH)
#undef MOETUNE_FP8_LAUNCH
  return Fail(RunStatus::kCannotImplement, "fused_gemv_fp8: unknown tile");
}

}  // namespace
}  // namespace moetune::gpu

namespace moetune::backends::fused_gemv_fp8 {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::NoWorkspace,
                                      &gpu::Launch,
                                      gpu::WeightLayout::kE4m3Bits};
  return launcher;
}

}  // namespace moetune::backends::fused_gemv_fp8
