// The tensor-core expert kernel behind fused_gemv and grouped_mma: one warp
// streams 16-row tiles of a tiled NVFP4 matrix (tiled_nvfp4.h) through its
// own cp.async ring in shared memory, decodes them in registers to fp16
// (E2M1 * 2^-14 by bit masks, times the E4M3 block scale by one HMUL2 per
// pair) and multiplies them with up to 8 * kNT tokens' activations by
// mma.sync.m16n8k16 (fp32 accumulation). Each weight byte is read once per
// token tile, and every token routed to the expert shares it.
// Each (mode, ragged K) pair is its own kernel, so a kernel holds only its
// own pipelines; runs of <= 2 tokens take their activations from a ring
// loaded two chunks ahead and across the units of a run
// (kernels/cuda/moe/PERF.md).
//
// Two schedules:
//  - stream-K (fused_gemv): the (slot, row group, K step) units of all
//    active experts are split evenly over a persistent grid's warps, in
//    rounds (each warp takes round_units consecutive units of a window that
//    all warps stream together, for DRAM/TLB locality); a warp that covers
//    only part of a row group's K adds its partial sums with atomics and the
//    last one (a per-group counter) applies the epilogue. gate_up streams the
//    shared expert before waiting for the router (programmatic dependent
//    launch); down issues its first weight copies before waiting for gate_up.
//  - tiles (grouped_mma): one block per (64-token tile, row block); each warp
//    owns 16 rows over the whole K; no atomics.
// Epilogues: gate_up -> h = SiLU(gate) * up (fp16, per token-slot position);
// down -> y[token] += w * out (atomics, stream-K) or yp[position] = w * out
// (tiles, combined later in a fixed order). Launch-only; not thread-safe.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/moe/layer.cuh"
#include "kernels/cuda/moe/tiled_nvfp4.h"

namespace moetune::gpu {

inline constexpr int kModeGateUp = 0;
inline constexpr int kModeDown = 1;
// The tiled decode yields E2M1 * 2^-14; outputs are scaled back by 2^14.
inline constexpr float kDecodeScale = 16384.0f;

struct MmaJob {
  MatrixView w;
  RunBuffers buf;
  int mode = kModeGateUp;
  const __half* b_src = nullptr;  // gate_up: x16 or permuted x; down: h
  int b_by_position = 0;          // B row = position (1) or token id (0)
  int ld_b = 0;
  float out_scale = 0;  // tensor scale * kDecodeScale
  int inter_local = 0, hidden = 0, batch = 0;
  float* yp = nullptr;  // tiles + down: [positions][hidden]
  int tile_bound = 0;   // tiles: upper bound of token tiles
  // Stream-K gate_up only: before waiting for the router (programmatic
  // dependent launch), stream the shared expert, whose slot (0), positions
  // [0, batch) and tokens are known without the routing, reading the BF16
  // input directly.
  int shared_first = 0;
  int shared_expert = 0;  // its index among the stored experts
  int round_units = 12;   // stream-K: units a warp takes per round
  // Stream-K: which of the router's slots this launch streams (layer.cuh's
  // wide slots lead the list).
  int slot_part = 0;  // kAllSlots, kWideSlots or kNarrowSlots
};

inline constexpr int kAllSlots = 0, kWideSlots = 1, kNarrowSlots = 2;

// The job fields every expert launch fills the same way from the layer:
// gate_up's or down's matrix, the run buffers, B's row length, the sizes,
// out_scale = tensor scale x `decode_scale` (what the kernel's decode leaves
// out). Backends add their B source and schedule fields.
inline MmaJob LayerJob(const LayerArgs& a, bool gate_up, float decode_scale) {
  MmaJob j;
  j.w = gate_up ? a.gate_up : a.down;
  j.buf = a.buf;
  j.mode = gate_up ? kModeGateUp : kModeDown;
  j.ld_b = gate_up ? a.geo.hidden : a.geo.inter_local;
  j.out_scale = j.w.tensor_scale * decode_scale;
  j.inter_local = a.geo.inter_local;
  j.hidden = a.geo.hidden;
  j.batch = a.geo.batch;
  return j;
}

// How many blocks of `kernel` (`threads` threads, `smem` bytes of dynamic
// shared memory, which it is allowed here) an SM of `device` holds, queried
// once a device into `cache` (one per kernel instantiation).
template <class Kernel>
GpuStatus BlocksPerSm(Kernel* kernel, int threads, int smem, int device,
                      int (&cache)[64], const char* who, int* n) {
  if (device < 0 || device >= 64) {
    return Fail(RunStatus::kBadProblem, "options.device: must be in [0, 64)");
  }
  if (cache[device] == 0) {
    MG_CUDA(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int blocks = 0;
    MG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel,
                                                          threads, smem));
    if (blocks < 1) {
      return Fail(RunStatus::kCannotImplement,
                  std::string(who) + " kernel does not fit on one SM");
    }
    cache[device] = blocks;
  }
  *n = cache[device];
  return OkStatus();
}

// kernel<<<grid, threads, smem, stream>>>(job), with programmatic stream
// serialization: the kernel may start while its predecessor on the stream
// still runs, and waits for it (GridDependencyWait) only where it needs its
// results.
template <class Kernel, class Job>
GpuStatus LaunchJob(Kernel* kernel, const Job& job, int grid, int threads,
                    int smem, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  MG_CUDA(cudaLaunchKernelEx(&config, kernel, job));
  return OkStatus();
}

namespace mma_detail {

template <int kRT, int kCPS>
struct Stage {
  static constexpr int kGroups = kCPS >= 4 ? kCPS / 4 : 1;
  static constexpr int kCodeBytes = kRT * kCPS * tiled::kChunkBytes;
  static constexpr int kBytes =
      kCodeBytes + kRT * kGroups * tiled::kScaleGroupBytes;
  static constexpr int kRaw = 9216 / kBytes;  // ~9 KB of ring per warp
  static constexpr int kCount = kRaw < 2 ? 2 : kRaw > 8 ? 8 : kRaw;
};

__device__ __forceinline__ void CpAsync8(void* dst, const void* src) {
  asm volatile(
      "cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(SmemAddr(dst)),
      "l"(src)
      : "memory");
}

__device__ __forceinline__ uint32_t HMul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// (scale of row g, scale of row g + 8) as E4M3 bytes -> fp16 (lo, lo), (hi,
// hi).
__device__ __forceinline__ void ScalePair(uint16_t bytes, uint32_t* lo,
                                          uint32_t* hi) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(bytes));
  *lo = __byte_perm(h2, 0, 0x1010);
  *hi = __byte_perm(h2, 0, 0x3232);
}

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Programmatic dependent launch: wait for the preceding kernel's results;
// let the next kernel's blocks launch. Both are no-ops without the launch
// attribute.
__device__ __forceinline__ void GridDependencyWait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void LaunchDependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// The scale group gi of row tile rt in a ring stage (this lane's 8 bytes).
template <int kRT, int kCPS>
__device__ __forceinline__ uint2 ScaleGroupAt(const uint8_t* stage, int rt,
                                              int gi, int lane) {
  using S = Stage<kRT, kCPS>;
  return *reinterpret_cast<const uint2*>(
      stage + S::kCodeBytes + (rt * S::kGroups + gi) * tiled::kScaleGroupBytes +
      lane * 8);
}

// A position in a warp's unit sequence: slot, row group (kRT row tiles), K
// step.
struct Cursor {
  int s = 0, rg = 0, ks = 0;
  __device__ void Next(int rgs, int steps) {
    if (++ks < steps) return;
    ks = 0;
    if (++rg < rgs) return;
    rg = 0;
    ++s;
  }
};

// A warp's share of a stream-K phase of `total` units: rounds of W * ur
// units, warp w taking the w-th ur of each (so all warps stream one window
// of the weights at a time), then an even split of the remainder.
struct WarpRange {
  int W = 1, w = 0, ur = 1, full_rounds = 0, rem_lo = 0, rem_hi = 0;
  __device__ WarpRange(int total, int W_, int w_, int ur_)
      : W(W_), w(w_), ur(ur_) {
    const int64_t round = static_cast<int64_t>(W) * ur;
    full_rounds = static_cast<int>(total / round);
    const int64_t rem = total - full_rounds * round;
    rem_lo = static_cast<int>(rem * w / W);
    rem_hi = static_cast<int>(rem * (w + 1) / W);
  }
  __device__ int Count() const { return full_rounds * ur + rem_hi - rem_lo; }
  __device__ bool SegmentStart(int i) const {
    return i < full_rounds * ur ? i % ur == 0 : i == full_rounds * ur;
  }
  __device__ int UnitAt(int i) const {
    if (i < full_rounds * ur) return (i / ur) * W * ur + w * ur + i % ur;
    return full_rounds * W * ur + rem_lo + (i - full_rounds * ur);
  }
};

// The run of consecutive units of one (slot, row group) being accumulated,
// and where its tokens' activations start (per n-tile, this lane's 16
// columns; nullptr past the slot's tokens).
template <int kNT>
struct Run {
  int s = -1, rg = 0, steps = 0, p0 = 0, ntok = 0;
  const uint16_t* b[kNT];
};

}  // namespace mma_detail
}  // namespace moetune::gpu
