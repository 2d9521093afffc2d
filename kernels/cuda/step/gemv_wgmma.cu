#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/backends/expert_mma/hopper_async.cuh"
#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/gemv_mma_tiles.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/gemv_wgmma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

namespace cg = cooperative_groups;
using gemv_detail::OutputOf;
using gemv_detail::RowOf;
using mma_detail::CpAsync16;
using mma_detail::CpAsyncCommit;
using mma_detail::CpAsyncWait;
using mma_detail::NoSwizzleDescriptor;
using mma_detail::SmemAddr;

// A block is WG warpgroups of 128 threads, each multiplying 64 rows
// (wgmma's M) by the block's split inputs.
template <int WG>
inline constexpr int kThreads = 128 * WG;
template <int WG>
inline constexpr int kRows = 64 * WG;
constexpr int kPiecesPerThread = 4;  // a stage's weights: 16-byte copies
constexpr int kStageK = 64;          // K a stage
constexpr int kStages = 5;           // the weights' ring
constexpr int kMaxCluster = 8;       // the portable cluster size

// Shared memory of NT n-tiles of 8 sequences: the weights' ring (wgmma's A,
// no-swizzle K-major), then two split-input tiles (wgmma's B: hi, mid and
// lo rows of every sequence; the next stage's is written while the current
// one's wgmmas run). Core matrices of 8 rows x 16 bytes; core matrix (row
// block, k8 group) at (block * 8 + group) * 128 bytes: K-adjacent ones 128
// bytes apart, row-adjacent ones 1024.
template <int NT, int WG>
struct Smem {
  static constexpr int kSeqs = 8 * NT;
  static constexpr int kN = 3 * kSeqs;  // wgmma's N
  static constexpr int kStageBytes = kRows<WG> * kStageK * 2;
  static constexpr int kBBytes = kN * kStageK * 2;
  static constexpr int kBytes = kStages * kStageBytes + 2 * kBBytes;
  // The block's partial sums at the end (in the ring, then drained).
  static_assert(kRows<WG> * kSeqs * 4 <= kStages * kStageBytes, "partials fit");
  // A stage's inputs: (sequence, k8 group, half) quarters of 4 floats, a
  // thread's (XQuarter).
  static constexpr int kXQuarters = kSeqs * 16;
  static constexpr int kXPieces =
      (kXQuarters + kThreads<WG> - 1) / kThreads<WG>;
};

__device__ __forceinline__ int CoreOffset(int row, int group) {
  return ((row / 8) * 8 + group) * 128 + (row % 8) * 16;
}

// This thread's generic-proxy writes to shared memory (cp.async's, its
// stores) made visible to wgmma, which reads through the async proxy.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// What a block reads: the rows whose weights this thread copies, and the
// block's input group.
struct BlockRows {
  const uint16_t* w[kPiecesPerThread];
  const float* x;
};

// Rows past the last read the last (valid memory; their outputs unused).
template <int WG>
__device__ __forceinline__ BlockRows BlockRowsOf(const Bf16Gemv& g, int r0) {
  BlockRows br;
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i) {
    const int row =
        min(r0 + threadIdx.x / 8 + i * (kThreads<WG> / 8), g.rows - 1);
    br.w[i] = reinterpret_cast<const uint16_t*>(RowOf(g, row).w);
  }
  br.x = RowOf(g, r0).x;
  return br;
}

// A stage's weights (K from k0) into `stage`: the block's rows x 8 pieces
// of 16 bytes, 4 a thread, 8 consecutive threads a row's 128 contiguous
// bytes.
template <int WG>
__device__ __forceinline__ void IssueWeights(const BlockRows& br, int k0,
                                             uint8_t* stage) {
  static_assert(kRows<WG> * 8 == kPiecesPerThread * kThreads<WG>);
  const int group = threadIdx.x % 8;
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i) {
    const int row = threadIdx.x / 8 + i * (kThreads<WG> / 8);
    CpAsync16(stage + CoreOffset(row, group), br.w[i] + k0 + group * 8);
  }
}

// A stage's inputs in registers: this thread's quarters (4 floats: half h
// of sequence s's k8 group g). Quarter u = threadIdx.x + i * kThreads: its
// lowest 2 bits (g's parity, h), then 3 bits of s, then g / 2, then s / 8.
// A warp's load reads 8 sequences' 64 contiguous bytes (whole sectors; a
// piece of 8 floats a thread, a sequence a lane, used half of each sector
// an instruction touched: ncu, device run 135), and its stores of a part
// write two 128-byte core-matrix rows (two wavefronts, not four).
struct XQuarter {
  int seq, group, half;
};
__device__ __forceinline__ XQuarter QuarterAt(int u) {
  const int rest = u / 32;
  return XQuarter{(rest / 4) * 8 + (u / 4) % 8, (rest % 4) * 2 + (u % 4) / 2,
                  u % 2};
}

template <int NT, int WG>
struct XPieces {
  float4 v[Smem<NT, WG>::kXPieces];
};

template <int NT, int WG>
__device__ __forceinline__ void LoadInputs(const Bf16Gemv& g,
                                           const BlockRows& br, int k0,
                                           XPieces<NT, WG>& x) {
  using S = Smem<NT, WG>;
#pragma unroll
  for (int i = 0; i < S::kXPieces; ++i) {
    const int u = threadIdx.x + i * kThreads<WG>;
    if (u >= S::kXQuarters) break;
    const XQuarter q = QuarterAt(u);
    // Past the batch: the last sequence (valid memory; unused columns).
    const int seq = min(q.seq, g.batch - 1);
    x.v[i] = __ldg(reinterpret_cast<const float4*>(
        br.x + seq * g.x_stride + k0 + q.group * 8 + q.half * 4));
  }
}

// The inputs split into wgmma's B: sequence s's parts are rows s, kSeqs + s
// and 2 kSeqs + s (hi, mid, lo); a quarter is half of a row's 16 bytes.
template <int NT, int WG>
__device__ __forceinline__ void SplitInputs(const XPieces<NT, WG>& x,
                                            uint8_t* b_tile) {
  using S = Smem<NT, WG>;
#pragma unroll
  for (int i = 0; i < S::kXPieces; ++i) {
    const int u = threadIdx.x + i * kThreads<WG>;
    if (u >= S::kXQuarters) break;
    const XQuarter q = QuarterAt(u);
    const float4 v = x.v[i];
    uint32_t h[2], m[2], l[2];
    SplitBf16(v.x, v.y, &h[0], &m[0], &l[0]);
    SplitBf16(v.z, v.w, &h[1], &m[1], &l[1]);
    const int at = q.half * 8;
    *reinterpret_cast<uint2*>(b_tile + CoreOffset(q.seq, q.group) + at) =
        make_uint2(h[0], h[1]);
    *reinterpret_cast<uint2*>(b_tile + CoreOffset(S::kSeqs + q.seq, q.group) +
                              at) = make_uint2(m[0], m[1]);
    *reinterpret_cast<uint2*>(b_tile +
                              CoreOffset(2 * S::kSeqs + q.seq, q.group) + at) =
        make_uint2(l[0], l[1]);
  }
}

// d (+)= A x B for one k16 step: A = 64 weight rows, B = 24 NT rows of
// split inputs, both K-major in shared memory (descriptors a and b);
// accumulate = 0 starts a fresh sum.
template <int NT>
__device__ __forceinline__ void WgmmaBf16(float (&d)[12 * NT], uint64_t a,
                                          uint64_t b, int accumulate);

template <>
__device__ __forceinline__ void WgmmaBf16<1>(float (&d)[12], uint64_t a,
                                             uint64_t b, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11"
      "}, %12, %13, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
#endif
}

template <>
__device__ __forceinline__ void WgmmaBf16<2>(float (&d)[24], uint64_t a,
                                             uint64_t b, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,"
      "%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23"
      "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
#endif
}

template <>
__device__ __forceinline__ void WgmmaBf16<4>(float (&d)[48], uint64_t a,
                                             uint64_t b, int accumulate) {
#ifndef MOETUNE_NO_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,"
      "%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
      "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,"
      "%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47"
      "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
#endif
}

// Adds a 32-K accumulator's three parts of each sequence into the totals:
// n-tile j's part p is accumulator group p * NT + j.
template <int NT>
__device__ __forceinline__ void Fold(const float (&d)[12 * NT],
                                     float (&total)[4 * NT]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      total[4 * j + e] +=
          (d[4 * (2 * NT + j) + e] + d[4 * (NT + j) + e]) + d[4 * j + e];
    }
  }
}

// Half h of a stage (k16 steps 2 h and 2 h + 1) into a fresh accumulator,
// issued; WaitAndFold adds it to the totals once done.
template <int NT>
__device__ __forceinline__ void IssueHalf(uint32_t a_addr, uint32_t b_addr,
                                          int half, float (&d)[12 * NT]) {
  mma_detail::WgmmaFence();
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    // k16 step 2 half + s: its two k8 core matrices start 256 bytes on.
    const int off = (2 * half + s) * 256;
    WgmmaBf16<NT>(d, NoSwizzleDescriptor<128, 1024>(a_addr + off),
                  NoSwizzleDescriptor<128, 1024>(b_addr + off), s);
  }
  mma_detail::WgmmaCommit();
}

template <int NT>
__device__ __forceinline__ void WaitAndFold(float (&d)[12 * NT],
                                            float (&total)[4 * NT]) {
  mma_detail::WgmmaWaitAll();
  Fold<NT>(d, total);
}

// The block's totals (warp w's rows 16 w + lane / 4 and + 8, columns 2 (lane
// % 4) and + 1 of each n-tile; warpgroup v's warps 64 v rows on) into
// partial[row][sequence].
template <int NT>
__device__ __forceinline__ void KeepTotals(const float (&total)[4 * NT],
                                           float* partial) {
  constexpr int kSeqs = 8 * NT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      partial[(row + (e >= 2 ? 8 : 0)) * kSeqs + 8 * j + col + (e & 1)] =
          total[4 * j + e];
    }
  }
}

// Rank `rank` of the cluster's `ranks` writes its share of the block's rows:
// each output the ranks' partial sums added in rank order.
template <int NT, int WG>
__device__ void StoreShare(const Bf16Gemv& g, int r0, float* partial, int rank,
                           int ranks) {
  constexpr int kSeqs = 8 * NT;
  cg::cluster_group cluster = cg::this_cluster();
  const int share = kRows<WG> / ranks;
  for (int i = threadIdx.x; i < share * kSeqs; i += kThreads<WG>) {
    const int rr = rank * share + i / kSeqs, b = i % kSeqs;
    if (r0 + rr >= g.rows || b >= g.batch) continue;
    float sum = 0.0f;
    for (int q = 0; q < ranks; ++q) {
      sum += (ranks == 1 ? partial
                         : cluster.map_shared_rank(partial, q))[rr * kSeqs + b];
    }
    *OutputOf(g, r0 + rr, b) = sum;
  }
}

// The cluster's partial sums of the block's rows, each output written once:
// every rank's totals into its own shared memory, then each rank adds its
// share of the rows over the ranks.
template <int NT, int WG>
__device__ __forceinline__ void SumOverCluster(const Bf16Gemv& g, int r0,
                                               const float (&total)[4 * NT],
                                               float* partial, int rank,
                                               int ranks) {
  KeepTotals<NT>(total, partial);
  if (ranks > 1) {
    cg::this_cluster().sync();  // every rank's partials are in
  } else {
    __syncthreads();
  }
  StoreShare<NT, WG>(g, r0, partial, rank, ranks);
  if (ranks > 1) cg::this_cluster().sync();  // no rank leaves while read
}

// Block (row block, rank): the rank's share of K's stages for the block's
// rows. One barrier a stage: while stage i's wgmmas run, the threads split
// stage i + 1's inputs (loaded into registers a stage before) into the
// other B tile and load stage i + 2's.
template <int NT, int WG>
__global__ void __launch_bounds__(kThreads<WG>, 2)
    GemvBf16WgmmaKernel(Bf16Gemv g, int ranks) {
  using S = Smem<NT, WG>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int rank = blockIdx.x % ranks, r0 = (blockIdx.x / ranks) * kRows<WG>;
  const int stages = g.k / kStageK;
  const int s_begin = rank * stages / ranks;
  const int count = (rank + 1) * stages / ranks - s_begin;
  const int k_begin = s_begin * kStageK;
  const BlockRows br = BlockRowsOf<WG>(g, r0);
  uint8_t* b_tiles = smem + kStages * S::kStageBytes;
  const auto stage_at = [&](int i) {
    return smem + (i % kStages) * S::kStageBytes;
  };
  const auto b_at = [&](int i) { return b_tiles + (i % 2) * S::kBBytes; };
  // Weights are no kernel's output: the first stages' copies go out
  // before the wait for the kernels before; the inputs after it.
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) IssueWeights<WG>(br, k_begin + i * kStageK, stage_at(i));
    CpAsyncCommit();
  }
  LetNextKernelStart();
  WaitForPriorKernels();
  XPieces<NT, WG> x;
  LoadInputs<NT, WG>(g, br, k_begin, x);
  SplitInputs<NT, WG>(x, b_at(0));
  if (count > 1) LoadInputs<NT, WG>(g, br, k_begin + kStageK, x);
  // This warpgroup's 64 rows of each stage's weights.
  const int a_offset = (threadIdx.x / 128) * 64 * 128;
  float total[4 * NT] = {};
  for (int i = 0; i < count; ++i) {
    CpAsyncWait<kStages - 2>();
    FenceProxyAsync();
    __syncthreads();  // stage i and its B are in; stage i - 1 is done
    const int next = i + kStages - 1;
    if (next < count)
      IssueWeights<WG>(br, k_begin + next * kStageK, stage_at(next));
    CpAsyncCommit();
    const uint32_t a = SmemAddr(stage_at(i)) + a_offset;
    const uint32_t b = SmemAddr(b_at(i));
    float d[12 * NT] = {};
    IssueHalf<NT>(a, b, 0, d);
    if (i + 1 < count) SplitInputs<NT, WG>(x, b_at(i + 1));
    if (i + 2 < count)
      LoadInputs<NT, WG>(g, br, k_begin + (i + 2) * kStageK, x);
    WaitAndFold<NT>(d, total);
    IssueHalf<NT>(a, b, 1, d);
    WaitAndFold<NT>(d, total);
  }
  CpAsyncWait<0>();
  __syncthreads();  // the ring is free: the partials go there
  SumOverCluster<NT, WG>(g, r0, total, reinterpret_cast<float*>(smem), rank,
                         ranks);
}

// K's split over a cluster of `ranks` blocks: the most (a power of two up
// to kMaxCluster) that keep the grid within one wave of `capacity` blocks
// and at least two stages a rank.
int Ranks(int row_blocks, int stages, int capacity) {
  int ranks = 1;
  while (ranks < kMaxCluster && row_blocks * ranks * 2 <= capacity &&
         stages / (2 * ranks) >= 2) {
    ranks *= 2;
  }
  return ranks;
}

template <int NT, int WG>
GpuStatus LaunchShape(const Bf16Gemv& g, cudaStream_t stream) {
  using S = Smem<NT, WG>;
  static std::atomic<size_t> allowed{0};
  static std::atomic<int> per_sm{0};  // the same on every device (sm_90)
  auto* kernel = &GemvBf16WgmmaKernel<NT, WG>;
  MG_RETURN_IF_ERROR(AllowSharedMemory(kernel, S::kBytes, &allowed));
  if (per_sm.load() == 0) {
    int blocks = 0;
    MG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, kernel, kThreads<WG>, S::kBytes));
    per_sm = std::max(blocks, 1);
  }
  const int row_blocks = (g.rows + kRows<WG> - 1) / kRows<WG>;
  const int stages = g.k / kStageK;
  const int ranks = Ranks(row_blocks, stages, per_sm * CurrentDeviceSmCount());
  const dim3 grid(row_blocks * ranks);
  if (ranks == 1) {
    return LaunchOverlapped(kernel, grid, dim3(kThreads<WG>), S::kBytes, stream,
                            g, ranks);
  }
  return LaunchOverlappedInClusters(kernel, grid, dim3(kThreads<WG>), S::kBytes,
                                    stream, ranks, g, ranks);
}

template <int NT>
GpuStatus LaunchNt(const Bf16Gemv& g, cudaStream_t stream) {
  // Two warpgroups a block (128 rows: the inputs' split shared by twice
  // the rows) where a block stays inside one input group.
  const bool one_group = g.rows_per_x >= g.rows;
  if (!(one_group || g.rows_per_x % kRows<2> == 0)) {
    return LaunchShape<NT, 1>(g, stream);
  }
  return LaunchShape<NT, 2>(g, stream);
}

bool DeviceHasWgmma() {
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                device) == cudaSuccess &&
         major == 9 && minor == 0;
}

}  // namespace

bool GemvBf16WgmmaFits(const Bf16Gemv& g) {
  return g.batch >= 1 && g.batch <= kGemvWgmmaMaxBatch && g.k > 0 &&
         gemv_mma::Fits(g, kStageK, kRows<1>) &&
         reinterpret_cast<uintptr_t>(g.w) % 16 == 0 && DeviceHasWgmma();
}

GpuStatus LaunchGemvBf16Wgmma(const Bf16Gemv& g, cudaStream_t stream) {
  if (g.batch <= 8) return LaunchNt<1>(g, stream);
  if (g.batch <= 16) return LaunchNt<2>(g, stream);
  return LaunchNt<4>(g, stream);
}

}  // namespace moetune::gpu
