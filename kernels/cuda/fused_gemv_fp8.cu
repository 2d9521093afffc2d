// fused_gemv_fp8: fused_gemv's schedule (router, ONE stream-K gate_up launch
// for every active expert, ONE for down) for a single token, with the
// weights decoded to FP8 E4M3 (tiled_e4m3.h: 5 integer operations per 8
// weights) and multiplied by mma.m16n8k32 e4m3 x e4m3 -> f32.
//
// Why one token: an NVFP4 block scale belongs to (row, 16 K), and an FP8
// mma's K of 32 spans all four lanes' blocks of a chunk, so the scale cannot
// be applied to A as fused_gemv does in fp16. Instead each of the mma's 8
// columns carries ONE block's activations (hi or lo half, act_fp8.cuh) and
// zeros elsewhere: column 2c + h = block c's half h, and lane (g, c)'s
// accumulators are exactly rows g and g + 8 of block c, hi and lo. Two mmas
// cover a 64-K chunk; then each lane adds hi + lo and multiplies by its
// block's weight scale (the same scale pair the fp16 layout already gives
// lane (g, c)) and the activation block's inverse scale: two FFMA per row
// per chunk instead of 16 HMUL2. The 8 columns are all used by one token;
// more tokens would need more mmas, so larger batches stay on fused_gemv.
//
// Only lanes g = 2c, 2c + 1 hold nonzero B (block c's hi / lo, 16 bytes per
// chunk, written by the router for x and by gate_up's epilogue for h); the
// others read 16 zero bytes with stride 0. gate_up waits for the router
// before streaming (its B is the router's output); down issues its first
// weight copies before waiting for gate_up, as in fused_gemv.
#include <string>

#include "kernels/backend_catalog.h"
#include "kernels/cuda/act_fp8.cuh"
#include "kernels/cuda/backends.cuh"
#include "kernels/cuda/expert_mma_impl.cuh"
#include "kernels/cuda/router.cuh"
#include "kernels/cuda/tiled_e4m3.h"

namespace moetune::gpu {
namespace {

using namespace mma_detail;

constexpr int kWarps = 4;
// Ring bytes per warp: 16 warps an SM share ~221 KB of shared memory.
constexpr int kRingBytesPerWarp = 13824;

template <int kRT, int kCPS>
struct Fp8Stage {
  using S = Stage<kRT, kCPS>;
  static constexpr int kRaw = kRingBytesPerWarp / S::kBytes;
  static constexpr int kCount = kRaw < 2 ? 2 : kRaw > 8 ? 8 : kRaw;
};

// The current (slot, row group) and where this lane's B comes from.
struct Fp8Run : Run<1> {
  const uint4* b = nullptr;  // this lane's 16 bytes of chunk 0
  int b_stride = 0;          // uint4 per chunk: 8, or 0 (zero lanes)
  const float* inv = nullptr;  // block c's inverse scale of chunk 0
};

__device__ __forceinline__ void MmaFp8(float (&d)[4], const uint32_t (&a)[4],
                                       uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int kRT>
__device__ void StartFp8Run(const MmaJob& j, const Cursor& u, Fp8Run& run,
                            float (&acc)[kRT][1][4], int lane) {
  run.s = u.s;
  run.rg = u.rg;
  run.steps = 0;
  run.p0 = __ldg(j.buf.slot_tok_off + u.s);
  run.ntok = __ldg(j.buf.slot_ntok + u.s);
  const bool gate_up = j.mode == kModeGateUp;
  // gate_up reads the token's input, down the position's h.
  const int row = gate_up ? __ldg(j.buf.tok_list + run.p0) : run.p0;
  const int blocks = j.ld_b / act_fp8::kBlock;
  const int64_t first = static_cast<int64_t>(row) * blocks + lane % 4;
  const uint8_t* bytes = gate_up ? j.buf.x_fp8 : j.buf.h_fp8;
  const bool holds_b = lane / 8 == lane % 4;  // g / 2 == c
  run.b = holds_b ? reinterpret_cast<const uint4*>(bytes) + first * 2 +
                        (lane / 4) % 2
                  : reinterpret_cast<const uint4*>(j.buf.zero16);
  run.b_stride = holds_b ? 8 : 0;
  run.inv = (gate_up ? j.buf.x_fp8_inv : j.buf.h_fp8_inv) + first;
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt)
    acc[rt][0][0] = acc[rt][0][1] = acc[rt][0][2] = acc[rt][0][3] = 0.0f;
}

// One unit: kCPS chunks of kRT row tiles. acc[rt][0][0] / [2]: rows g / g + 8
// of block c (this lane's), summed over the unit's chunks.
template <int kRT, int kCPS>
__device__ __forceinline__ void ComputeFp8Unit(const uint8_t* stage, int ks,
                                               const Fp8Run& run,
                                               float (&acc)[kRT][1][4],
                                               int lane) {
  using S = Stage<kRT, kCPS>;
  const int kc0 = ks * kCPS;
  uint4 b[kCPS];
  float inv[kCPS];
#pragma unroll
  for (int q = 0; q < kCPS; ++q) {
    b[q] = __ldg(run.b + (kc0 + q) * run.b_stride);
    inv[q] = __ldg(run.inv + (kc0 + q) * 4);
  }
#pragma unroll
  for (int rt = 0; rt < kRT; ++rt) {
    uint2 sg[S::kGroups];
#pragma unroll
    for (int gi = 0; gi < S::kGroups; ++gi) {
      sg[gi] = *reinterpret_cast<const uint2*>(
          stage + S::kCodeBytes +
          (rt * S::kGroups + gi) * tiled::kScaleGroupBytes + lane * 8);
    }
#pragma unroll
    for (int q = 0; q < kCPS; ++q) {
      const uint4 cw = *reinterpret_cast<const uint4*>(
          stage + (rt * kCPS + q) * tiled::kChunkBytes + lane * 16);
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      uint32_t a[4];
      tiled_e4m3::DecodeWord(cw.x, &a[0], &a[1]);
      tiled_e4m3::DecodeWord(cw.y, &a[2], &a[3]);
      MmaFp8(d, a, b[q].x, b[q].y);
      tiled_e4m3::DecodeWord(cw.z, &a[0], &a[1]);
      tiled_e4m3::DecodeWord(cw.w, &a[2], &a[3]);
      MmaFp8(d, a, b[q].z, b[q].w);
      // Units of < 4 chunks start inside a scale group.
      const int qs = kCPS < 4 ? (ks * kCPS + q) % 4 : q % 4;
      const float2 s = act_fp8::FromE4m3x2(ScaleOf(sg[kCPS < 4 ? 0 : q / 4], qs));
      acc[rt][0][0] = fmaf(d[0] + d[1], s.x * inv[q], acc[rt][0][0]);
      acc[rt][0][2] = fmaf(d[2] + d[3], s.y * inv[q], acc[rt][0][2]);
    }
  }
}

// h of one token for 2 row tiles (16 intermediate indices: one block) ->
// its FP8 hi + lo bytes and inverse scale, for down.
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
    const int64_t at = static_cast<int64_t>(run.p0) * blocks + block;
    uint8_t* dst = j.buf.h_fp8 + at * act_fp8::kBlockBytes;
    dst[g] = static_cast<uint8_t>(hi);
    dst[8 + g] = static_cast<uint8_t>(hi >> 8);
    dst[16 + g] = static_cast<uint8_t>(lo);
    dst[24 + g] = static_cast<uint8_t>(lo >> 8);
    if (g == 0) j.buf.h_fp8_inv[at] = inv;
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

// One warp's stream-K units through its cp.async ring (fused_gemv's
// RunUnits without the fp16 paths). kPreWait: the first copies go out
// before waiting for the previous kernel.
template <int kRT, int kCPS, int kMode, bool kPreWait>
__device__ void RunFp8Units(const MmaJob& j, const StreamKSeq& seq,
                            uint8_t* ring, int lane) {
  using S = Stage<kRT, kCPS>;
  constexpr int kStages = Fp8Stage<kRT, kCPS>::kCount;
  const SlotSource<false, true> src{&j, 0};
  const int count = seq.Count();
  Cursor in, cur;
  int in_left = 0, cur_left = 0, in_stage = 0, cur_stage = 0, in_s = -1,
      in_e = 0;
  auto issue = [&](int i) {
    seq.Advance(i, in, in_left);
    if (in.s != in_s) {
      in_s = in.s;
      in_e = src.Expert(in.s);
    }
    IssueUnit<kRT, kCPS, true>(j, in, in_e, ring + in_stage * S::kBytes, lane);
    in_stage = in_stage + 1 == kStages ? 0 : in_stage + 1;
  };
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) issue(i);
    CpAsyncCommit();
  }
  if (kPreWait) {
    GridDependencyWait();
    LaunchDependents();
  }
  Fp8Run run;
  float acc[kRT][1][4];
  for (int i = 0; i < count; ++i) {
    __syncwarp();  // every lane is done reading the stage about to be refilled
    if (i + kStages - 1 < count) issue(i + kStages - 1);
    CpAsyncCommit();
    seq.Advance(i, cur, cur_left);
    if (cur.s != run.s || cur.rg != run.rg) {
      if (run.s >= 0)
        FlushFp8<kRT, kMode>(j, run, acc, seq.steps, seq.rgs, lane);
      StartFp8Run<kRT>(j, cur, run, acc, lane);
    }
    ++run.steps;
    CpAsyncWait<kStages - 1>();
    ComputeFp8Unit<kRT, kCPS>(ring + cur_stage * S::kBytes, cur.ks, run, acc,
                              lane);
    cur_stage = cur_stage + 1 == kStages ? 0 : cur_stage + 1;
  }
  if (run.s >= 0) FlushFp8<kRT, kMode>(j, run, acc, seq.steps, seq.rgs, lane);
  CpAsyncWait<0>();
}

template <int kRT, int kCPS, int kMode>
__global__ void __launch_bounds__(kWarps * 32, 4)
    Fp8ExpertKernel(const __grid_constant__ MmaJob job) {
  using S = Stage<kRT, kCPS>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* ring = smem + warp * Fp8Stage<kRT, kCPS>::kCount * S::kBytes;
  const int rgs = job.w.rows / tiled::kTileRows / kRT;
  const int steps = job.w.chunks / kCPS;
  const int W = gridDim.x * kWarps, w = blockIdx.x * kWarps + warp;
  const int per_slot = rgs * steps;
  if (kMode == kModeGateUp) {
    // Every slot, the shared expert's too, needs the router's x_fp8.
    GridDependencyWait();
    LaunchDependents();
  }
  // down: gate_up started its dependents only after the router finished, so
  // the slot count is final (read through L2).
  const int units = __ldcg(job.buf.meta + kMetaSlots) * per_slot;
  const StreamKSeq seq{WarpRange(units, W, w, job.round_units), 0, per_slot,
                       rgs, steps};
  RunFp8Units<kRT, kCPS, kMode, kMode == kModeDown>(job, seq, ring, lane);
}

template <int kRT, int kCPS, int kMode>
GpuStatus LaunchFp8(const MmaJob& job, int device, int sm_count,
                    cudaStream_t stream) {
  constexpr int kSmem =
      kWarps * Fp8Stage<kRT, kCPS>::kCount * Stage<kRT, kCPS>::kBytes;
  constexpr int kMaxDevices = 64;
  static int blocks_per_sm[kMaxDevices] = {};
  auto* kernel = &Fp8ExpertKernel<kRT, kCPS, kMode>;
  if (device < 0 || device >= kMaxDevices) {
    return Fail(RunStatus::kBadProblem, "options.device: must be in [0, 64)");
  }
  if (blocks_per_sm[device] == 0) {
    MG_CUDA(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int n = 0;
    MG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel,
                                                          kWarps * 32, kSmem));
    if (n < 1) {
      return Fail(RunStatus::kCannotImplement,
                  "fused_gemv_fp8 kernel does not fit on one SM");
    }
    blocks_per_sm[device] = n;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(sm_count * blocks_per_sm[device]));
  config.blockDim = dim3(kWarps * 32);
  config.dynamicSmemBytes = kSmem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = job.pdl ? 1 : 0;
  MG_CUDA(cudaLaunchKernelEx(&config, kernel, job));
  return OkStatus();
}

MmaJob Fp8Job(const LayerArgs& a, bool gate_up) {
  MmaJob j;
  j.w = gate_up ? a.gate_up : a.down;
  j.buf = a.buf;
  j.mode = gate_up ? kModeGateUp : kModeDown;
  j.ld_b = gate_up ? a.geo.hidden : a.geo.inter_local;
  j.out_scale = j.w.tensor_scale * tiled_e4m3::kDecodeScale;
  j.inter_local = a.geo.inter_local;
  j.hidden = a.geo.hidden;
  j.batch = a.geo.batch;
  j.pdl = PdlEnabled();
  return j;
}

template <int kRT, int kCPS>
GpuStatus LaunchTile(const LayerArgs& a, cudaStream_t stream) {
  MG_RETURN_IF_ERROR((LaunchFp8<kRT, kCPS, kModeGateUp>(
      Fp8Job(a, true), a.device, a.sm_count, stream)));
  return LaunchFp8<kRT, kCPS, kModeDown>(Fp8Job(a, false), a.device,
                                         a.sm_count, stream);
}

bool IsTile(const LayerArgs& a) {
#define MOETUNE_FP8_IS(n, k) \
  if (a.block_n == (n) && a.block_k == (k)) return true;
  MOETUNE_FUSED_GEMV_FP8_TILES(MOETUNE_FP8_IS)
#undef MOETUNE_FP8_IS
  return false;
}

GpuStatus CanImplement(const LayerArgs& a) {
  if (!IsTile(a)) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_fp8 has no tile " + std::to_string(a.block_n) +
                    "x" + std::to_string(a.block_k) +
                    "; tiles: " + TileList("fused_gemv_fp8"));
  }
  if (a.geo.batch != 1) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_fp8 runs one token (its FP8 mma columns carry one "
                "token's four scale blocks); batch is " +
                    std::to_string(a.geo.batch) + " (use fused_gemv)");
  }
  if (a.geo.hidden % a.block_k != 0 || a.geo.inter_local % a.block_k != 0) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_fp8 tile " + std::to_string(a.block_n) + "x" +
                    std::to_string(a.block_k) + ": block_k must divide hidden " +
                    std::to_string(a.geo.hidden) + " and moe_inter / tp " +
                    std::to_string(a.geo.inter_local));
  }
  return CheckTiledDims(a, a.block_n, "fused_gemv_fp8");
}

size_t WorkspaceBytes(const LayerArgs&) { return 0; }

GpuStatus Launch(const LayerArgs& args, void*, cudaStream_t stream) {
  LayerArgs a = args;
  a.router_writes_x_fp8 = true;
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
#define MOETUNE_FP8_LAUNCH(n, k)            \
  if (a.block_n == (n) && a.block_k == (k)) \
    return LaunchTile<(n) / 16, (k) / 64>(a, stream);
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
