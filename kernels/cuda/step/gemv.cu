// LaunchGemvBf16 and LaunchGemvNvfp4 (gemv.cuh): the step's GEMVs, each
// dispatched to the kernel of its batch and weights (CUDA cores, mma,
// wgmma).
#include <algorithm>
#include <string>

#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/gemv.cuh"
#include "kernels/cuda/step/gemv_mma.cuh"
#include "kernels/cuda/step/gemv_nvfp4_few.cuh"
#include "kernels/cuda/step/gemv_nvfp4_mma.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/gemv_wgmma.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

using gemv_detail::Dot8;
using gemv_detail::GemvRow;
using gemv_detail::OutputOf;
using gemv_detail::RowOf;
using gemv_detail::SumPartsAndStore;
using gemv_detail::Unpack4;
using gemv_detail::Unpack8;
using mma_detail::CpAsync16;
using mma_detail::CpAsyncCommit;
using mma_detail::CpAsyncWait;

constexpr int kWarpsPerBlock = 8;

// Loads in flight per lane from 3 sequences (the CUDA-core kernel's, where
// the tensor-core ones do not fit); one and two sequences:
// GemvBf16FewKernel's own count.
constexpr int kGemvUnroll = 4;

// acc[i] += 8 weights of chunk c8 . sequence b0 + i's inputs, i < nb. NB is
// a compile-time bound so that a batch of one issues one product, not
// kGemvBatchChunk predicated ones.
template <int NB>
__device__ __forceinline__ void AccumulateChunk(const uint4& packed,
                                                const GemvRow& row,
                                                const Bf16Gemv& g, int b0,
                                                int nb, int c8, float* acc) {
  float wf[8];
  Unpack8(packed, wf);
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    if (i < nb) acc[i] += Dot8(wf, row.x + (b0 + i) * g.x_stride + c8 * 8);
  }
}

// Block = kWarpsPerBlock / ks rows x ks parts of K: warp (row, part) sums
// every ks-th group of 32 chunks of its row, U loads in flight a lane; the
// parts meet in shared memory. ks > 1 lets a GEMV of few rows
// keep enough warps (and loads) in flight to fill the GPU.
template <int NB, int U>
__device__ __forceinline__ void GemvBf16Body(const Bf16Gemv& g, int ks) {
  __shared__ float partial[kWarpsPerBlock][NB];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows_per_block = kWarpsPerBlock / ks;
  const int r = blockIdx.x * rows_per_block + warp / ks, part = warp % ks;
  const bool live = r < g.rows;
  const GemvRow row = RowOf(g, live ? r : 0);
  const int chunks = g.k / 8, stride = 32 * ks;
  // No L2 prefetch of the rows before the wait: under overlapped launches it
  // floods the memory beside the latency-bound kernel before (+0.25 ms a
  // step at batch 1), as a side stream of prefetches does too.
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += NB) {
    const int nb = min(NB, g.batch - b0);
    float acc[NB] = {};
    for (int c0 = part * 32 + lane; live && c0 < chunks; c0 += stride * U) {
      uint4 loaded[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c8 = c0 + stride * u;
        loaded[u] = c8 < chunks ? __ldg(row.w + c8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c8 = c0 + stride * u;
        if (c8 < chunks)
          AccumulateChunk<NB>(loaded[u], row, g, b0, nb, c8, acc);
      }
    }
    SumPartsAndStore<NB, kWarpsPerBlock>(
        acc, nb, ks, g.rows, partial,
        [&](int r, int i, float sum) { *OutputOf(g, r, b0 + i) = sum; });
  }
}

// acc[i] += 4 weights (one 8-byte load) . sequence b0 + i's float4 of x.
template <int NB>
__device__ __forceinline__ void AccumulateQuad(const uint2& packed,
                                               const float* x0,
                                               const Bf16Gemv& g, int nb,
                                               int quad, float* acc) {
  float w[4];
  Unpack4(packed, w);
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    if (i >= nb) continue;
    const float4 x = reinterpret_cast<const float4*>(x0 + i * g.x_stride)[quad];
    acc[i] += w[0] * x.x + w[1] * x.y + w[2] * x.z + w[3] * x.w;
  }
}

// One round of a lane's loads: halves la[u] and lb[u] are quads qa + u *
// quad_stride and 32 beyond it (those past `quads` are not accumulated).
template <int NB, int U>
__device__ __forceinline__ void AccumulateRound(
    const uint2 (&la)[U], const uint2 (&lb)[U], const float* x0,
    const Bf16Gemv& g, int nb, int qa, int quad_stride, int quads, float* acc) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int q = qa + quad_stride * u;
    if (q < quads) AccumulateQuad<NB>(la[u], x0, g, nb, q, acc);
    if (q + 32 < quads) AccumulateQuad<NB>(lb[u], x0, g, nb, q + 32, acc);
  }
}

// The first kAhead rounds of a warp's weights in the one- and two-sequence
// GEMVs, copied into `stage` (kAhead x U groups of 32 chunks) with
// cp.async before the kernel waits for the one before it: they do not
// depend on it, so their trip to memory overlaps that kernel's tail and the
// dependency's sync rather than following them. Shared memory, not
// registers: the kernel's 32-register budget (eight blocks an SM) has no
// room for loads held across the wait.
template <int U, int kAhead>
__device__ __forceinline__ void StageRoundsAhead(const GemvRow& row, int part,
                                                 int chunks, int stride,
                                                 uint4* stage) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < kAhead; ++j) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c8 = part * 32 + stride * (j * U + u) + lane;
      if (c8 < chunks) CpAsync16(stage + (j * U + u) * 32 + lane, row.w + c8);
    }
  }
  CpAsyncCommit();
}

// GemvBf16Body with a lane's 16 bytes of a 256-K group taken as two 8-byte
// halves, quads lane and 32 + lane of the group, so that a warp's float4
// loads of x are lane-contiguous (4 L1 wavefronts each, not 8): the one-
// and two-sequence kernels' body. Alone no faster (ncu: the input projections
// 14.2 us either way, L1 busy 51 -> 37 %), in the step -1 % at batch 1 and -4 %
// at batch 2, where the kernels beside it share the SMs' L1. With kAhead > 0
// the warp's first kAhead rounds come from StageRoundsAhead's copies (issued
// before the wait) and the rest as before; kAhead = 0 loads every round after
// the wait (a first round held in registers across it made the step 3-6 %
// slower).
template <int NB, int U, int kAhead>
__device__ __forceinline__ void GemvBf16QuadBody(const Bf16Gemv& g, int ks) {
  __shared__ float partial[kWarpsPerBlock][NB];
  extern __shared__ uint4 ahead[];  // [warp][kAhead * U][32 chunks]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows_per_block = kWarpsPerBlock / ks;
  const int r = blockIdx.x * rows_per_block + warp / ks, part = warp % ks;
  const bool live = r < g.rows;
  const GemvRow row = RowOf(g, live ? r : 0);
  const uint2* w = reinterpret_cast<const uint2*>(row.w);
  const int chunks = g.k / 8, quads = g.k / 4, stride = 32 * ks;
  uint4* stage = ahead + warp * (kAhead * U * 32);
  if constexpr (kAhead > 0) {
    if (live) StageRoundsAhead<U, kAhead>(row, part, chunks, stride, stage);
  }
  EnterAfterPriorKernels();
  if constexpr (kAhead > 0) {
    CpAsyncWait<0>();
    __syncwarp();  // each lane reads halves its neighbours copied
  }
  const uint2* staged = reinterpret_cast<const uint2*>(stage);
  for (int b0 = 0; b0 < g.batch; b0 += NB) {
    const int nb = min(NB, g.batch - b0);
    const float* x0 = row.x + b0 * g.x_stride;
    float acc[NB] = {};
    int c0 = part * 32;
    // The staged rounds first (a lane's halves at 64-quad groups' slots).
    for (int j = 0; b0 == 0 && j < kAhead && live && c0 < chunks;
         ++j, c0 += stride * U) {
      uint2 la[U], lb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        la[u] = staged[(j * U + u) * 64 + lane];
        lb[u] = staged[(j * U + u) * 64 + 32 + lane];
      }
      AccumulateRound<NB, U>(la, lb, x0, g, nb, 2 * c0 + lane, 2 * stride,
                             quads, acc);
    }
    // Written out rather than through AccumulateRound: this form compiles to
    // the 32 and 40 registers these kernels were tuned at (through the
    // helper, 31 and 36 and a slower loop).
    for (; live && c0 < chunks; c0 += stride * U) {
      uint2 la[U], lb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int qa = 2 * (c0 + stride * u) + lane, qb = qa + 32;
        la[u] = qa < quads ? __ldg(w + qa) : make_uint2(0, 0);
        lb[u] = qb < quads ? __ldg(w + qb) : make_uint2(0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int qa = 2 * (c0 + stride * u) + lane, qb = qa + 32;
        if (qa < quads) AccumulateQuad<NB>(la[u], x0, g, nb, qa, acc);
        if (qb < quads) AccumulateQuad<NB>(lb[u], x0, g, nb, qb, acc);
      }
    }
    SumPartsAndStore<NB, kWarpsPerBlock>(
        acc, nb, ks, g.rows, partial,
        [&](int r, int i, float sum) { *OutputOf(g, r, b0 + i) = sum; });
  }
}

template <int NB>
__global__ void GemvBf16Kernel(Bf16Gemv g, int ks) {
  GemvBf16Body<NB, kGemvUnroll>(g, ks);
}
// One or two sequences: two 16-byte loads' worth in flight a lane (four of
// 8 bytes: GemvBf16QuadBody), so that a GEMV of the step's size (700-770
// blocks) runs in one wave. One sequence: 32
// registers, eight blocks (every warp slot) an SM; a kernel of eight
// loads in flight (64 registers, four blocks an SM) runs 1.3-1.45 waves, its
// last blocks alone on the GPU (ncu: 44 % occupancy, DRAM 31 %): the TP8
// step at batch 1 takes 7.40 ms here against its 8.16 (four loads, six
// blocks: 7.57; one load, eight blocks: 7.41; more K parts a row for more
// warps: 7.64). Two sequences: 40 registers, six blocks an SM (eight
// spill and are no faster). Not a TMA-ring streaming kernel: its 64 KB of
// stages a block keep the next kernels off the SMs (on an H100, the step at
// batch 2 TP8 11.65 / 11.61 ms against this kernel's 11.05 / 11.05, EP8
// 12.01 / 11.95 against 11.49 / 11.53).
constexpr int kGemvFewUnroll = 2;
template <int NB>
inline constexpr int kGemvFewBlocksPerSm = NB == 1 ? 8 : 6;
// Rounds a warp stages ahead of the wait (StageRoundsAhead): 2 of the
// step's 4-6 rounds a warp, a third to a half of its bytes; 16 KB a block,
// so that eight blocks an SM still fit (3 rounds, 24 KB a block, were slower
// at one and two sequences).
constexpr int kGemvFewAheadRounds = 2;
template <int NB, int kAhead>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kGemvFewBlocksPerSm<NB>)
    GemvBf16FewKernel(Bf16Gemv g, int ks) {
  GemvBf16QuadBody<NB, kGemvFewUnroll, kAhead>(g, ks);
}

// Decodes 16 weights of one block (8 code bytes) with the E2M1 table and
// the block's decoded scale.
__device__ __forceinline__ void DecodeBlock(uint32_t lo, uint32_t hi, float s,
                                            const float* e2m1, float* out) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    out[i] = e2m1[(lo >> (4 * i)) & 0xfu] * s;
    out[8 + i] = e2m1[(hi >> (4 * i)) & 0xfu] * s;
  }
}

// A lane takes two blocks (16 code bytes, 2 scales) at a time; the E2M1 and
// E4M3 values come from tables in shared memory. k % 32 == 0. Batches of 3
// or more where the tensor-core kernel does not fit; 1 and 2 take
// gemv_nvfp4_few.cu's (124 registers here: two blocks an SM).
__global__ void GemvNvfp4Kernel(Nvfp4Gemv g) {
  __shared__ float e2m1[16], e4m3[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    e4m3[i] = nvfp4::E4M3ToFloat(i);
    if (i < 16) e2m1[i] = nvfp4::E2M1ToFloat(i);
  }
  __syncthreads();
  const int r = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= g.rows) return;
  const int group = r / g.rows_per_x, within = r % g.rows_per_x;
  const int64_t w_row = group * g.w_group_stride + g.w_group_offset + within;
  const float* x_row = g.x + group * g.x_group_stride;
  const uint4* codes =
      reinterpret_cast<const uint4*>(g.codes + w_row * g.k / 2);
  const uint16_t* scales =
      reinterpret_cast<const uint16_t*>(g.scales + w_row * (g.k / 16));
  const int pairs = g.k / 32;
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += kGemvBatchChunk) {
    const int nb = min(kGemvBatchChunk, g.batch - b0);
    float acc[kGemvBatchChunk] = {};
    for (int pi = lane; pi < pairs; pi += 32) {
      const uint4 c = __ldg(codes + pi);
      const uint16_t sc = __ldg(scales + pi);
      float wf[32];
      DecodeBlock(c.x, c.y, e4m3[sc & 0xffu], e2m1, wf);
      DecodeBlock(c.z, c.w, e4m3[sc >> 8], e2m1, wf + 16);
#pragma unroll
      for (int i = 0; i < kGemvBatchChunk; ++i) {
        if (i >= nb) continue;
        const float* x = x_row + (b0 + i) * g.x_stride + pi * 32;
        acc[i] += Dot8(wf, x) + Dot8(wf + 8, x + 8) + Dot8(wf + 16, x + 16) +
                  Dot8(wf + 24, x + 24);
      }
    }
#pragma unroll
    for (int i = 0; i < kGemvBatchChunk; ++i) {
      const float sum = WarpSum(acc[i]);
      if (lane == 0 && i < nb) {
        g.y[(b0 + i) * g.y_stride + r] = sum * g.tensor_scale;
      }
    }
  }
}

}  // namespace

template <int NB>
GpuStatus LaunchGemvBf16Nb(const Bf16Gemv& g, cudaStream_t stream,
                           const LaunchPolicy& policy) {
  const int ks = gemv_detail::RowKParts(g.rows, g.k / 8, kWarpsPerBlock);
  const int blocks = gemv_detail::RowBlocks(g.rows, ks, kWarpsPerBlock);
  if constexpr (NB <= 2) {
    if (!policy.weights_ahead) {
      return LaunchOverlapped(GemvBf16FewKernel<NB, 0>, blocks,
                              32 * kWarpsPerBlock, 0, stream, policy, g, ks);
    }
    constexpr int kStage =
        kWarpsPerBlock * kGemvFewAheadRounds * kGemvFewUnroll * 32 * 16;
    return LaunchOverlapped(GemvBf16FewKernel<NB, kGemvFewAheadRounds>, blocks,
                            32 * kWarpsPerBlock, kStage, stream, policy, g, ks);
  } else {
    return LaunchOverlapped(GemvBf16Kernel<NB>, blocks, 32 * kWarpsPerBlock, 0,
                            stream, policy, g, ks);
  }
}

void AddGemvSegment(Bf16Gemv* g, int rows, float* y, int64_t y_stride) {
  if (g->segments >= Bf16Gemv::kMaxSegments) {
    g->segments = Bf16Gemv::kMaxSegments + 1;  // refused at launch
    return;
  }
  const int s = g->segments++;
  g->rows += rows;
  g->seg_end[s] = g->rows;
  g->seg_y[s] = y;
  g->seg_y_stride[s] = y_stride;
}

GpuStatus LaunchGemvBf16(const Bf16Gemv& given, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  Bf16Gemv g = given;
  if (g.segments > Bf16Gemv::kMaxSegments) {
    return Fail(RunStatus::kBadProblem,
                "a BF16 GEMV takes at most " +
                    std::to_string(Bf16Gemv::kMaxSegments) + " segments");
  }
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  if (g.batch >= kGemvWgmmaMinBatch && GemvBf16WgmmaFits(g)) {
    return LaunchGemvBf16Wgmma(g, stream, policy);
  }
  if (g.batch >= kGemvMmaMinBatch && GemvBf16MmaFits(g)) {
    return LaunchGemvBf16Mma(g, stream, policy);
  }
  if (g.batch >= 8) return LaunchGemvBf16Nb<8>(g, stream, policy);
  if (g.batch >= 4) return LaunchGemvBf16Nb<4>(g, stream, policy);
  if (g.batch >= 2) return LaunchGemvBf16Nb<2>(g, stream, policy);
  return LaunchGemvBf16Nb<1>(g, stream, policy);
}

GpuStatus LaunchGemvNvfp4(const Nvfp4Gemv& given, cudaStream_t stream,
                          const LaunchPolicy& policy) {
  Nvfp4Gemv g = given;
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  if (g.k % 32 != 0) {
    return Fail(RunStatus::kCannotImplement,
                "the NVFP4 GEMV reads two blocks at a time: k must be a "
                "multiple of 32, got " +
                    std::to_string(g.k));
  }
  if (g.batch >= kGemvMmaMinBatch && GemvNvfp4MmaFits(g)) {
    return LaunchGemvNvfp4Mma(g, stream, policy);
  }
  if (g.batch <= 2) return LaunchGemvNvfp4Few(g, stream, policy);
  const int blocks = (g.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return LaunchOverlapped(GemvNvfp4Kernel, blocks, 32 * kWarpsPerBlock, 0,
                          stream, policy, g);
}

}  // namespace moetune::gpu
