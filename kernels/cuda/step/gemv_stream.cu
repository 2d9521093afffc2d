#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/backends/expert_mma/hopper_async.cuh"
#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/gemv_stream.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

using gemv_detail::Dot8;
using gemv_detail::GemvRow;
using gemv_detail::OutputOf;
using gemv_detail::RowOf;
using gemv_detail::Unpack8;
using mma_detail::BulkCopy;
using mma_detail::MbarArrive;
using mma_detail::MbarArriveExpectTx;
using mma_detail::MbarInit;
using mma_detail::MbarWait;

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kStages = 4;
constexpr int kStageBytes = 16 * 1024;
constexpr int kSmemBytes = kStages * kStageBytes;
// Three blocks an SM (3 x 64 KB of stages): ~150-190 KB of copies in
// flight an SM, past the ~75 KB that DRAM's latency x bandwidth asks.
constexpr int kBlocksPerSm = 3;
constexpr int kMaxBlockRows = 128;  // the partial sums' shared memory

// Stream position p of a block: its first row, how many rows, which piece.
struct StagePiece {
  int row, rows, piece;
};

__device__ __forceinline__ StagePiece PieceAt(const GemvStreamPlan& plan,
                                              int r_begin, int r_end, int p) {
  const int row = r_begin + (p / plan.pieces) * plan.rows_per_stage;
  return {row, min(plan.rows_per_stage, r_end - row), p % plan.pieces};
}

// One lane: every stage's copy, waiting for the consumers to free a stage
// before refilling it. It never waits for the kernels before: no kernel
// writes weights, so the first kStages copies overlap the kernel before.
__device__ void Produce(const Bf16Gemv& g, const GemvStreamPlan& plan,
                        int r_begin, int r_end, int total, uint8_t* ring,
                        uint64_t* full, uint64_t* empty) {
  for (int p = 0; p < total; ++p) {
    const int s = p % kStages;
    if (p >= kStages) MbarWait(&empty[s], (p / kStages - 1) & 1);
    const StagePiece at = PieceAt(plan, r_begin, r_end, p);
    const uint32_t bytes = at.rows * plan.piece_k * 2;
    const uint4* src =
        RowOf(g, at.row).w + int64_t{at.piece} * (plan.piece_k / 8);
    MbarArriveExpectTx(&full[s], bytes);
    BulkCopy(ring + s * kStageBytes, src, bytes, &full[s]);
  }
}

// Consumer warp `warp`: in each stage, row warp % rows_per_stage's part
// warp / rows_per_stage of the piece's K, for NB sequences; at a row's last
// piece its warp-summed part goes to partial[row][part].
template <int NB>
__device__ void Consume(const Bf16Gemv& g, const GemvStreamPlan& plan,
                        int r_begin, int r_end, int total, const uint8_t* ring,
                        uint64_t* full, uint64_t* empty,
                        float (*partial)[kConsumerWarps][NB], int warp,
                        int lane) {
  const int m = plan.rows_per_stage, parts = kConsumerWarps / m;
  const int ri = warp % m, part = warp / m, vectors = plan.piece_k / 8;
  float acc[NB] = {};
  for (int p = 0; p < total; ++p) {
    const int s = p % kStages;
    const StagePiece at = PieceAt(plan, r_begin, r_end, p);
    MbarWait(&full[s], (p / kStages) & 1);
    if (ri < at.rows) {
      const GemvRow row = RowOf(g, at.row + ri);
      const uint4* w =
          reinterpret_cast<const uint4*>(ring + s * kStageBytes) + ri * vectors;
      const float* x = row.x + int64_t{at.piece} * plan.piece_k;
#pragma unroll 4
      for (int i = part * 32 + lane; i < vectors; i += parts * 32) {
        float wf[8];
        Unpack8(w[i], wf);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          acc[b] += Dot8(wf, x + b * g.x_stride + i * 8);
        }
      }
    }
    __syncwarp();
    if (lane == 0) MbarArrive(&empty[s]);
    if (at.piece != plan.pieces - 1) continue;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const float sum = WarpSum(acc[b]);
      if (lane == 0 && ri < at.rows)
        partial[at.row + ri - r_begin][part][b] = sum;
      acc[b] = 0.0f;
    }
  }
}

// Block = rows_per_block consecutive rows: a producer warp and
// kConsumerWarps consumers; the parts of each row added in a fixed order.
template <int NB>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    GemvBf16StreamKernel(Bf16Gemv g, GemvStreamPlan plan) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  __shared__ float partial[kMaxBlockRows][kConsumerWarps][NB];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r_begin = blockIdx.x * plan.rows_per_block;
  const int r_end = min(g.rows, r_begin + plan.rows_per_block);
  const int m = plan.rows_per_stage;
  const int total = (r_end - r_begin + m - 1) / m * plan.pieces;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(&full[s], 1);
      MbarInit(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  LetNextKernelStart();
  if (warp == kConsumerWarps) {
    if (lane == 0) Produce(g, plan, r_begin, r_end, total, ring, full, empty);
  } else {
    WaitForPriorKernels();  // before reading the inputs
    Consume<NB>(g, plan, r_begin, r_end, total, ring, full, empty, partial,
                warp, lane);
  }
  __syncthreads();
  WaitForPriorKernels();  // the producer's threads write outputs too
  const int parts = kConsumerWarps / m;
  for (int t = threadIdx.x; t < (r_end - r_begin) * NB; t += kThreads) {
    const int rl = t / NB, b = t % NB;
    float sum = 0.0f;
    for (int q = 0; q < parts; ++q) sum += partial[rl][q][b];
    *OutputOf(g, r_begin + rl, b) = sum;
  }
}

template <int NB>
GpuStatus LaunchNb(const Bf16Gemv& g, const GemvStreamPlan& plan,
                   cudaStream_t stream) {
  static std::atomic<size_t> allowed{48 * 1024};
  MG_RETURN_IF_ERROR(
      AllowSharedMemory(GemvBf16StreamKernel<NB>, kSmemBytes, &allowed));
  return LaunchOverlapped(GemvBf16StreamKernel<NB>, plan.blocks, kThreads,
                          kSmemBytes, stream, g, plan);
}

// A stage's rows: whole rows, as many as fit (a power of two up to 8 that
// divides the rows of an input group, so no copy straddles two groups),
// else one row in the fewest pieces of whole 16-byte vectors that fit.
bool PlanStages(const Bf16Gemv& g, GemvStreamPlan* p) {
  const int64_t row_bytes = int64_t{g.k} * 2;
  const bool grouped = g.rows_per_x < g.rows;
  if (row_bytes <= kStageBytes) {
    p->rows_per_stage = 8;
    while (p->rows_per_stage > 1 &&
           (p->rows_per_stage * row_bytes > kStageBytes ||
            (grouped && g.rows_per_x % p->rows_per_stage != 0))) {
      p->rows_per_stage /= 2;
    }
    p->pieces = 1;
    p->piece_k = g.k;
    return true;
  }
  p->rows_per_stage = 1;
  p->pieces = static_cast<int>((row_bytes + kStageBytes - 1) / kStageBytes);
  while (p->pieces <= 64 && (g.k % p->pieces != 0 || (g.k / p->pieces) % 8)) {
    ++p->pieces;
  }
  p->piece_k = p->pieces <= 64 ? g.k / p->pieces : 0;
  return p->pieces <= 64;
}

}  // namespace

bool PlanGemvStream(const Bf16Gemv& g, GemvStreamPlan* plan) {
  const auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (g.batch != 2 || g.k <= 0 || g.k % 8 != 0 || g.rows <= 0 ||
      g.rows_per_x <= 0 || !aligned(g.w)) {
    return false;
  }
  GemvStreamPlan p;
  if (!PlanStages(g, &p)) return false;
  const int sm_count = CurrentDeviceSmCount();
  if (sm_count <= 0) return false;
  const int m = p.rows_per_stage, target = kBlocksPerSm * sm_count;
  int per_block = (g.rows + target - 1) / target;
  per_block = std::min((per_block + m - 1) / m * m, kMaxBlockRows / m * m);
  p.rows_per_block = per_block;
  p.blocks = (g.rows + per_block - 1) / per_block;
  *plan = p;
  return true;
}

GpuStatus LaunchGemvBf16Stream(const Bf16Gemv& g, const GemvStreamPlan& plan,
                               cudaStream_t stream) {
  return LaunchNb<2>(g, plan, stream);
}

}  // namespace moetune::gpu
