#include <algorithm>
#include <string>

#include "kernels/cuda/overlap_launch.cuh"
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
  // floods the memory beside the latency-bound kernel before (device run 48:
  // +0.25 ms a step at batch 1), as a side stream of prefetches did (run 44).
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

// GemvBf16Body with a lane's 16 bytes of a 256-K group taken as two 8-byte
// halves, quads lane and 32 + lane of the group, so that a warp's float4
// loads of x are lane-contiguous (4 L1 wavefronts each, not 8): the one-
// and two-sequence kernels' body. Alone no faster (ncu, device run 124: the
// input projections 14.2 us either way, L1 busy 51 -> 37 %), in the step
// -1 % at batch 1 and -4 % at batch 2, where the kernels beside it share
// the SMs' L1.
template <int NB, int U>
__device__ __forceinline__ void GemvBf16QuadBody(const Bf16Gemv& g, int ks) {
  __shared__ float partial[kWarpsPerBlock][NB];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows_per_block = kWarpsPerBlock / ks;
  const int r = blockIdx.x * rows_per_block + warp / ks, part = warp % ks;
  const bool live = r < g.rows;
  const GemvRow row = RowOf(g, live ? r : 0);
  const uint2* w = reinterpret_cast<const uint2*>(row.w);
  const int chunks = g.k / 8, quads = g.k / 4, stride = 32 * ks;
  // Unlike the tensor-core and NVFP4 GEMVs, no weights are loaded before
  // the wait: the first round loaded so made this kernel slower (device run
  // 127: its own time +0.5 us a launch at batch 1, +1.7 at batch 2; the
  // step +3 % and +6 %), not faster.
  EnterAfterPriorKernels();
  for (int b0 = 0; b0 < g.batch; b0 += NB) {
    const int nb = min(NB, g.batch - b0);
    const float* x0 = row.x + b0 * g.x_stride;
    float acc[NB] = {};
    for (int c0 = part * 32; live && c0 < chunks; c0 += stride * U) {
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
// registers, eight blocks (every warp slot) an SM; the kernel of eight
// loads in flight (64 registers, four blocks an SM) ran 1.3-1.45 waves, its
// last blocks alone on the GPU (ncu: 44 % occupancy, DRAM 31 %); device
// runs 115-116, the TP8 step at batch 1: 8.16 -> 7.40 ms (four loads, six
// blocks: 7.57; one load, eight blocks: 7.41; more K parts a row for more
// warps: 7.64). Two sequences: 40 registers, six blocks an SM (eight
// spilled and were no faster); it replaced a TMA-ring streaming kernel
// (v19), whose 64 KB of stages a block kept the next kernels off the SMs:
// device run 118 (H100), the step at batch 2 TP8 11.65 / 11.61 -> 11.05 /
// 11.05 ms, EP8 12.01 / 11.95 -> 11.49 / 11.53.
constexpr int kGemvFewUnroll = 2;
template <int NB>
inline constexpr int kGemvFewBlocksPerSm = NB == 1 ? 8 : 6;
template <int NB>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kGemvFewBlocksPerSm<NB>)
    GemvBf16FewKernel(Bf16Gemv g, int ks) {
  GemvBf16QuadBody<NB, kGemvFewUnroll>(g, ks);
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

constexpr int kAbsorbColumns = 32, kAbsorbGroups = 8;
// From this batch a block absorbs several sequences' queries (a warp a
// sequence in its last sum, so at most kAbsorbGroups).
constexpr int kAbsorbSharedFromBatch = 8, kAbsorbSequencesPerBlock = 8;
static_assert(kAbsorbSequencesPerBlock <= kAbsorbGroups);

// E2M1(code) * E4M3(block scale) of element (row, col) of a row-major NVFP4
// matrix with k columns (the tensor scale left to the caller).
__device__ __forceinline__ float Nvfp4Unscaled(const uint8_t* codes,
                                               const uint8_t* scales, int64_t k,
                                               int64_t row, int64_t col) {
  const uint32_t byte = __ldg(codes + row * (k / 2) + col / 2);
  const uint32_t code = (col & 1) ? (byte >> 4) : (byte & 0xfu);
  const uint32_t scale = __ldg(scales + row * (k / 16) + col / 16);
  return nvfp4::E2M1ToFloat(code) * nvfp4::E4M3ToFloat(scale);
}

template <int kSeq>
__global__ void AbsorbQueryKernel(AbsorbQuery a) {
  EnterAfterPriorKernels();
  __shared__ float partial[kAbsorbGroups][kSeq][kAbsorbColumns + 1];
  const int h = blockIdx.x, b0 = blockIdx.y * kSeq;
  const int seqs = kSeq == 1 ? 1 : min(kSeq, a.batch - b0);
  const int col = threadIdx.x % kAbsorbColumns;
  const int group = threadIdx.x / kAbsorbColumns;
  const int j = blockIdx.z * kAbsorbColumns + col;
  const float* q = a.q + b0 * a.q_stride + h * a.q_head_stride;
  const int64_t first_row = static_cast<int64_t>(h) * (a.nope + a.v_dim);
  float acc[kSeq] = {};
  if (j < a.kv_lora && a.codes == nullptr) {
    const uint16_t* w = a.kv_b + first_row * a.kv_lora + j;
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const float wi = Bf16ToFloat(w[static_cast<int64_t>(i) * a.kv_lora]);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        if (s < seqs) acc[s] += q[s * a.q_stride + i] * wi;
      }
    }
  } else if (j < a.kv_lora) {
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const float wi =
          Nvfp4Unscaled(a.codes, a.scales, a.kv_lora, first_row + i, j);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        if (s < seqs) acc[s] += q[s * a.q_stride + i] * wi;
      }
    }
#pragma unroll
    for (int s = 0; s < kSeq; ++s) acc[s] *= a.tensor_scale;
  }
#pragma unroll
  for (int s = 0; s < kSeq; ++s) partial[group][s][col] = acc[s];
  __syncthreads();
  const int s = group;
  if (s >= seqs || j >= a.kv_lora) return;
  float sum = 0.0f;
  for (int g = 0; g < kAbsorbGroups; ++g) sum += partial[g][s][col];
  a.q_lat[(static_cast<int64_t>(b0 + s) * a.heads + h) * a.kv_lora + j] = sum;
}

// From kAbsorbSharedFromBatch sequences with BF16 weights: a thread four
// adjacent columns (one 8-byte load of W_UK a row), so that each query
// value read serves four products, the block's queries staged in shared
// memory once (AbsorbQueryKernel loads a weight and eight query floats for
// eight products; this: -0.3 to -1.2 % of the step at 8-32 sequences,
// device runs 188-189, where the absorption runs beside the indexer and must
// end before its top-k). Each output is the same sums in the same order as
// AbsorbQueryKernel's (rows group, group + 8, ..., then the groups in
// order): the same bits.
constexpr int kAbsorbQuadColumns = 4 * kAbsorbColumns;  // a block's
constexpr int kAbsorbMaxNope = 256;
__global__ void __launch_bounds__(kAbsorbColumns* kAbsorbGroups)
    AbsorbQueryQuadKernel(AbsorbQuery a) {
  constexpr int kSeq = kAbsorbSequencesPerBlock;
  __shared__ float qs[kSeq][kAbsorbMaxNope];
  __shared__ float partial[kAbsorbGroups][kSeq][kAbsorbQuadColumns + 4];
  const int h = blockIdx.x, b0 = blockIdx.y * kSeq;
  const int seqs = min(kSeq, a.batch - b0);
  const int lane = threadIdx.x % kAbsorbColumns;
  const int group = threadIdx.x / kAbsorbColumns;
  const int j0 = blockIdx.z * kAbsorbQuadColumns + 4 * lane;
  EnterAfterPriorKernels();
  for (int t = threadIdx.x; t < kSeq * a.nope; t += blockDim.x) {
    const int s = t / a.nope, i = t % a.nope;
    qs[s][i] =
        s < seqs ? a.q[(b0 + s) * a.q_stride + h * a.q_head_stride + i] : 0.0f;
  }
  __syncthreads();
  float acc[kSeq][4] = {};
  if (j0 < a.kv_lora) {
    const uint16_t* w =
        a.kv_b + static_cast<int64_t>(h) * (a.nope + a.v_dim) * a.kv_lora + j0;
#pragma unroll 4
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const uint2 packed = __ldg(reinterpret_cast<const uint2*>(
          w + static_cast<int64_t>(i) * a.kv_lora));
      float wf[4];
      Unpack4(packed, wf);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        const float qv = qs[s][i];
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[s][c] += qv * wf[c];
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSeq; ++s) {
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[group][s][4 * lane + c] = acc[s][c];
  }
  __syncthreads();
  const int s = threadIdx.x / kAbsorbColumns;  // a warp a sequence
  if (s >= seqs || j0 >= a.kv_lora) return;
  float sum[4] = {};
  for (int g = 0; g < kAbsorbGroups; ++g) {
#pragma unroll
    for (int c = 0; c < 4; ++c) sum[c] += partial[g][s][4 * lane + c];
  }
  float* out =
      a.q_lat + (static_cast<int64_t>(b0 + s) * a.heads + h) * a.kv_lora + j0;
#pragma unroll
  for (int c = 0; c < 4; ++c) out[c] = sum[c];
}

// Whether AbsorbQueryQuadKernel takes a: BF16 weights whose rows' 8-byte
// runs are aligned, a nope its staged queries hold.
bool AbsorbQuadTakes(const AbsorbQuery& a) {
  return a.codes == nullptr && a.batch >= kAbsorbSharedFromBatch &&
         a.kv_lora % 4 == 0 && a.nope <= kAbsorbMaxNope &&
         reinterpret_cast<uintptr_t>(a.kv_b) % 8 == 0;
}

}  // namespace

template <int NB>
GpuStatus LaunchGemvBf16Nb(const Bf16Gemv& g, cudaStream_t stream) {
  const int ks = gemv_detail::RowKParts(g.rows, g.k / 8, kWarpsPerBlock);
  const int blocks = gemv_detail::RowBlocks(g.rows, ks, kWarpsPerBlock);
  if constexpr (NB <= 2) {
    return LaunchOverlapped(GemvBf16FewKernel<NB>, blocks, 32 * kWarpsPerBlock,
                            0, stream, g, ks);
  } else {
    return LaunchOverlapped(GemvBf16Kernel<NB>, blocks, 32 * kWarpsPerBlock, 0,
                            stream, g, ks);
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

GpuStatus LaunchGemvBf16(const Bf16Gemv& given, cudaStream_t stream) {
  Bf16Gemv g = given;
  if (g.segments > Bf16Gemv::kMaxSegments) {
    return Fail(RunStatus::kBadProblem,
                "a BF16 GEMV takes at most " +
                    std::to_string(Bf16Gemv::kMaxSegments) + " segments");
  }
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  if (g.batch >= kGemvWgmmaMinBatch && GemvBf16WgmmaFits(g)) {
    return LaunchGemvBf16Wgmma(g, stream);
  }
  if (g.batch >= kGemvMmaMinBatch && GemvBf16MmaFits(g)) {
    return LaunchGemvBf16Mma(g, stream);
  }
  if (g.batch >= 8) return LaunchGemvBf16Nb<8>(g, stream);
  if (g.batch >= 4) return LaunchGemvBf16Nb<4>(g, stream);
  if (g.batch >= 2) return LaunchGemvBf16Nb<2>(g, stream);
  return LaunchGemvBf16Nb<1>(g, stream);
}

GpuStatus LaunchGemvNvfp4(const Nvfp4Gemv& given, cudaStream_t stream) {
  Nvfp4Gemv g = given;
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  if (g.k % 32 != 0) {
    return Fail(RunStatus::kCannotImplement,
                "the NVFP4 GEMV reads two blocks at a time: k must be a "
                "multiple of 32, got " +
                    std::to_string(g.k));
  }
  if (g.batch >= kGemvMmaMinBatch && GemvNvfp4MmaFits(g)) {
    return LaunchGemvNvfp4Mma(g, stream);
  }
  if (g.batch <= 2) return LaunchGemvNvfp4Few(g, stream);
  const int blocks = (g.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return LaunchOverlapped(GemvNvfp4Kernel, blocks, 32 * kWarpsPerBlock, 0,
                          stream, g);
}

GpuStatus LaunchAbsorbQuery(const AbsorbQuery& a, cudaStream_t stream) {
  const int column_blocks = (a.kv_lora + kAbsorbColumns - 1) / kAbsorbColumns;
  const int threads = kAbsorbColumns * kAbsorbGroups;
  if (a.batch < kAbsorbSharedFromBatch) {
    return LaunchOverlapped(AbsorbQueryKernel<1>,
                            dim3(a.heads, a.batch, column_blocks), threads, 0,
                            stream, a);
  }
  constexpr int kSeq = kAbsorbSequencesPerBlock;
  if (AbsorbQuadTakes(a)) {
    const int quad_blocks =
        (a.kv_lora + kAbsorbQuadColumns - 1) / kAbsorbQuadColumns;
    return LaunchOverlapped(
        AbsorbQueryQuadKernel,
        dim3(a.heads, (a.batch + kSeq - 1) / kSeq, quad_blocks), threads, 0,
        stream, a);
  }
  return LaunchOverlapped(
      AbsorbQueryKernel<kSeq>,
      dim3(a.heads, (a.batch + kSeq - 1) / kSeq, column_blocks), threads, 0,
      stream, a);
}

}  // namespace moetune::gpu
