#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/base/tensor_map.cuh"
#include "kernels/cuda/step/gemv_mma_tiles.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/gemv_wgmma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

namespace cg = cooperative_groups;
using gemv_detail::OutputOf;
using mma_detail::BulkCopyToRank;
using mma_detail::EvictFirstPolicy;
using mma_detail::MapToRank;
using mma_detail::MbarArrive;
using mma_detail::MbarArriveExpectTx;
using mma_detail::MbarInit;
using mma_detail::MbarWait;
using mma_detail::NoSwizzleDescriptor;
using mma_detail::SmemAddr;
using mma_detail::Swizzle128Descriptor;
using mma_detail::TensorCopy3d;

// The block's partial sums at the end, partial[row][sequence]: rows kSeqs +
// 4 floats apart (a row a whole number of 16-byte pieces, for the bulk
// copies to the other ranks).
template <int NT>
inline constexpr int kPartialStride = 8 * NT + 4;

// A block: WG consumer warpgroups of 128 threads (each multiplying 64 weight
// rows by the block's split inputs), then four splitter warps, then a copy
// warp (its first thread issues every copy). Consumers come first so their
// warpgroups start on a multiple of four warps, as wgmma requires.
template <int WG>
inline constexpr int kConsumers = 128 * WG;
template <int WG>
inline constexpr int kRows = 64 * WG;
constexpr int kSplitters = 128;  // threads splitting a stage's inputs
template <int WG>
inline constexpr int kThreads = kConsumers<WG> + kSplitters + 32;
constexpr int kStageK = 64;              // K a stage
constexpr int kMaxStages = 8;            // the ring's depth at most
constexpr int kRingBudget = 220 << 10;   // the ring's shared memory at most
constexpr int kXRowBytes = kStageK * 4;  // a sequence's 64 raw floats
constexpr int kMaxCluster = 8;           // the portable cluster size

// Shared memory of NT n-tiles of 8 sequences, a ring of kStages stages,
// each: the weights (wgmma's A: a TMA box of 64 K x the block's rows in the
// 128-byte swizzle), the sequences' raw inputs (a TMA box of 64 K x kSeqs
// sequences, zeros past the batch) and their split (wgmma's B, no swizzle:
// hi, mid and lo rows of every sequence; core matrices of 8 rows x 16 bytes,
// (row block, k8 group) at (block * 8 + group) * 128 bytes; the 128-byte
// swizzle here instead measures no faster). The A slots first (1024-aligned),
// then the inputs', the splits', and three mbarriers a stage: loaded (the
// copies' bytes), full (the split written), empty (the consumers done).
template <int NT, int WG>
struct Smem {
  static constexpr int kSeqs = 8 * NT;
  static constexpr int kN = 3 * kSeqs;  // wgmma's N
  static constexpr int kABytes = kRows<WG> * kStageK * 2;
  static constexpr int kXBytes = kSeqs * kXRowBytes;
  static constexpr int kBBytes = kN * kStageK * 2;
  static constexpr int kStageBytes = kABytes + kXBytes + kBBytes;
  static constexpr int kStages = kRingBudget / kStageBytes < kMaxStages
                                     ? kRingBudget / kStageBytes
                                     : kMaxStages;
  static constexpr int kXOffset = kStages * kABytes;
  static constexpr int kBOffset = kXOffset + kStages * kXBytes;
  static constexpr int kBarOffset = kBOffset + kStages * kBBytes;
  // + 1024: the dynamic shared memory's start aligned up to the swizzle's.
  // Three barriers a stage and the end's (the other ranks' partial sums in).
  static constexpr int kBytes = kBarOffset + (3 * kStages + 1) * 8 + 1024;
  // A stage's copies: the weights' box and the inputs'.
  static constexpr uint32_t kLoadedBytes = kABytes + kXBytes;
  // At the end: the partial sums at the ring's start, then the other
  // ranks' sums of this rank's rows, a slot a rank (a share is at most half
  // the block's rows where there are ranks).
  static constexpr int kRecvOffset = kRows<WG> * kPartialStride<NT> * 4;
  static constexpr int kRecvSlotFloats = kRows<WG> / 2 * kPartialStride<NT>;
  static_assert(kRecvOffset + kMaxCluster * kRecvSlotFloats * 4 <= kBarOffset,
                "partials fit");
  static_assert(kStages >= 3, "a ring of at least three stages");
  // A stage's inputs: (sequence, k8 group, half) quarters of 4 floats.
  static constexpr int kXQuarters = kSeqs * 16;
  static constexpr int kXPieces = kXQuarters / kSplitters;
  static_assert(kXQuarters % kSplitters == 0, "whole quarters a splitter");
};

__device__ __forceinline__ int CoreOffset(int row, int group) {
  return ((row / 8) * 8 + group) * 128 + (row % 8) * 16;
}

// This thread's generic-proxy writes to shared memory (its stores) made
// visible to wgmma, which reads through the async proxy.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The ring's slots and barriers of stage i (slot i % kStages).
template <int NT, int WG>
struct Ring {
  using S = Smem<NT, WG>;
  uint8_t* base;
  __device__ uint8_t* a(int i) const {
    return base + (i % S::kStages) * S::kABytes;
  }
  __device__ uint8_t* x(int i) const {
    return base + S::kXOffset + (i % S::kStages) * S::kXBytes;
  }
  __device__ uint8_t* b(int i) const {
    return base + S::kBOffset + (i % S::kStages) * S::kBBytes;
  }
  __device__ uint64_t* bar(int kind, int i) const {
    return reinterpret_cast<uint64_t*>(base + S::kBarOffset) +
           kind * S::kStages + i % S::kStages;
  }
  __device__ uint64_t* loaded(int i) const { return bar(0, i); }
  __device__ uint64_t* full(int i) const { return bar(1, i); }
  __device__ uint64_t* empty(int i) const { return bar(2, i); }
  // The end's: the other ranks' partial sums of this rank's rows in.
  __device__ uint64_t* sums_in() const { return bar(3, 0); }
  // The parity of stage i's phase of its slot's barriers.
  __device__ static uint32_t Phase(int i) { return (i / S::kStages) & 1; }
};

// Where a block works: its rows' group and first row within it (the tensor
// maps' coordinates) and its K range in stages.
struct BlockPlan {
  int group, within, k_begin, count;
};

// The copy thread (the copy warp's first): each stage's two tensor copies
// into its slot once the consumers have emptied it (the inputs' as one box:
// a bulk copy a sequence costs the batch-32 input projections 3.02 against
// 2.20 ms a step; the weights by cp.async from 128 copier threads instead of
// a box: 3.01). The first stages' weights go out before the wait for the
// kernels before (weights are no kernel's output); every input after it.
template <int NT, int WG>
__device__ void IssueCopies(const CUtensorMap* w_map, const CUtensorMap* x_map,
                            const BlockPlan& p, const Ring<NT, WG>& ring) {
  using S = Smem<NT, WG>;
  const uint64_t policy = EvictFirstPolicy();
  const int first = min(p.count, S::kStages);
  const auto weights = [&](int j) {
    MbarArriveExpectTx(ring.loaded(j), S::kLoadedBytes);
    TensorCopy3d(ring.a(j), w_map, p.k_begin + j * kStageK, p.within, p.group,
                 ring.loaded(j), policy);
  };
  const auto inputs = [&](int j) {
    TensorCopy3d(ring.x(j), x_map, p.k_begin + j * kStageK, 0, p.group,
                 ring.loaded(j));
  };
  for (int j = 0; j < first; ++j) weights(j);
  WaitForPriorKernels();
  for (int j = 0; j < first; ++j) inputs(j);
  for (int j = first; j < p.count; ++j) {
    MbarWait(ring.empty(j), Ring<NT, WG>::Phase(j) ^ 1);
    weights(j);
    inputs(j);
  }
}

// A stage's inputs: quarter u (4 floats: half h of sequence s's k8 group g)
// has in its lowest 2 bits g's parity and h, then 3 bits of s, then g / 2,
// then s / 8: a warp's stores of a part write two 128-byte core-matrix rows
// (two wavefronts, not four).
struct XQuarter {
  int seq, group, half;
};
__device__ __forceinline__ XQuarter QuarterAt(int u) {
  const int rest = u / 32;
  return XQuarter{(rest / 4) * 8 + (u / 4) % 8, (rest % 4) * 2 + (u % 4) / 2,
                  u % 2};
}

// Splitter t's quarters of a stage's raw inputs split into wgmma's B:
// sequence s's parts are rows s, kSeqs + s and 2 kSeqs + s (hi, mid, lo).
template <int NT, int WG>
__device__ __forceinline__ void SplitStage(const uint8_t* raw, uint8_t* b_tile,
                                           int t) {
  using S = Smem<NT, WG>;
#pragma unroll
  for (int i = 0; i < S::kXPieces; ++i) {
    const XQuarter q = QuarterAt(t + i * kSplitters);
    const float4 v = *reinterpret_cast<const float4*>(
        raw + q.seq * kXRowBytes + q.group * 32 + q.half * 16);
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

// The warp's arrival on `bar` once every lane's work before is done: lane 0
// arrives for it (a barrier counts warps, not threads: 32 times fewer
// arrivals on its shared word a stage).
__device__ __forceinline__ void ArriveAsWarp(uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) MbarArrive(bar);
}

// The splitters: each stage's inputs split once its copies are in.
template <int NT, int WG>
__device__ void SplitStages(const BlockPlan& p, const Ring<NT, WG>& ring) {
  const int t = threadIdx.x - kConsumers<WG>;
  for (int i = 0; i < p.count; ++i) {
    MbarWait(ring.loaded(i), Ring<NT, WG>::Phase(i));
    SplitStage<NT, WG>(ring.x(i), ring.b(i), t);
    FenceProxyAsync();
    ArriveAsWarp(ring.full(i));
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

// A stage's four k16 steps into a fresh accumulator, issued as one commit
// group (after the caller's wgmma fence). A: this warpgroup's 64 rows in the
// 128-byte swizzle (a k16 step 32 bytes on); B: no swizzle (a k16 step's
// two k8 core matrices 256 bytes on).
template <int NT>
__device__ __forceinline__ void IssueStage(uint32_t a_addr, uint32_t b_addr,
                                           float (&d)[12 * NT]) {
#pragma unroll
  for (int step = 0; step < 4; ++step) {
    WgmmaBf16<NT>(d, Swizzle128Descriptor(a_addr + step * 32),
                  NoSwizzleDescriptor<128, 1024>(b_addr + step * 256),
                  step > 0);
  }
  mma_detail::WgmmaCommit();
}

// The consumers: a fresh accumulator a stage (64 K), its products waited
// for and folded into the totals before the next stage's are issued; the
// block's other warpgroups multiply meanwhile. (Not two accumulators,
// folding one stage's while the next stage's products run: ptxas
// serializes those wgmmas anyway (C7514), and the 2 x 48 floats a thread at
// 32 sequences leave three warpgroups a block 632 bytes of spills. One
// accumulator with the three-warpgroup blocks below: -0.2-0.3 % of the step
// at 6-32 sequences.)
template <int NT, int WG>
__device__ void MultiplyStages(const BlockPlan& p, const Ring<NT, WG>& ring,
                               float (&total)[4 * NT]) {
  // This warpgroup's 64 rows of a stage's weights (8 KB on).
  const uint32_t a_offset = (threadIdx.x / 128) * 64 * 128;
  // A stage's first wgmma overwrites the accumulator (scale-d 0): set once.
  float d[12 * NT] = {};
  for (int i = 0; i < p.count; ++i) {
    const uint32_t phase = Ring<NT, WG>::Phase(i);
    MbarWait(ring.loaded(i), phase);  // the weights' copy (async proxy)
    MbarWait(ring.full(i), phase);    // the split
    mma_detail::WgmmaFence();
    IssueStage<NT>(SmemAddr(ring.a(i)) + a_offset, SmemAddr(ring.b(i)), d);
    mma_detail::WgmmaWait<0>();
    Fold<NT>(d, total);
    ArriveAsWarp(ring.empty(i));
  }
}

// The block's totals (warp w's rows 16 w + lane / 4 and + 8, columns 2 (lane
// % 4) and + 1 of each n-tile; warpgroup v's warps 64 v rows on) into
// partial[row][sequence], rows kSeqs + 4 floats apart.
template <int NT>
__device__ __forceinline__ void KeepTotals(const float (&total)[4 * NT],
                                           float* partial) {
  constexpr int kStride = kPartialStride<NT>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      partial[(row + (e >= 2 ? 8 : 0)) * kStride + 8 * j + col + (e & 1)] =
          total[4 * j + e];
    }
  }
}

// Rank q's share of the block's rows: [first, first + count).
struct Share {
  int first, count;
};
template <int WG>
__device__ __forceinline__ Share ShareOf(int q, int ranks) {
  const int first = q * kRows<WG> / ranks;
  return Share{first, (q + 1) * kRows<WG> / ranks - first};
}

// Every other rank's rows of this block's partial sums pushed into that
// rank's slot for this rank, one bulk copy each (the owner adds them from its
// own shared memory: remote loads a sum, generic ones, take 4-6 us a block),
// after this block's arrival announcing the bytes it takes in. One thread.
template <int NT, int WG>
__device__ void PushPartials(const float* partial, float* recv,
                             uint64_t* sums_in, int rank, int ranks) {
  using S = Smem<NT, WG>;
  constexpr int kRowBytes = kPartialStride<NT> * 4;
  MbarArriveExpectTx(sums_in,
                     (ranks - 1) * ShareOf<WG>(rank, ranks).count * kRowBytes);
  for (int q = 0; q < ranks; ++q) {
    if (q == rank) continue;
    const Share to = ShareOf<WG>(q, ranks);
    BulkCopyToRank(MapToRank(SmemAddr(recv + rank * S::kRecvSlotFloats), q),
                   SmemAddr(partial + to.first * kPartialStride<NT>),
                   to.count * kRowBytes, MapToRank(SmemAddr(sums_in), q));
  }
}

// This rank's share of the block's rows written: each output the ranks'
// partial sums added in rank order (its own from `partial`, rank q's from
// its slot of `recv`); consecutive threads consecutive rows of one
// sequence (y's order).
template <int NT, int WG>
__device__ void StoreShare(const Bf16Gemv& g, int r0, const float* partial,
                           const float* recv, int rank, int ranks) {
  using S = Smem<NT, WG>;
  constexpr int kStride = kPartialStride<NT>;
  const Share mine = ShareOf<WG>(rank, ranks);
  for (int i = threadIdx.x; i < mine.count * g.batch; i += kThreads<WG>) {
    const int at = i % mine.count, b = i / mine.count;
    const int rr = mine.first + at;
    if (r0 + rr >= g.rows) continue;
    float sum = 0.0f;
    for (int q = 0; q < ranks; ++q) {
      sum += q == rank ? partial[rr * kStride + b]
                       : recv[q * S::kRecvSlotFloats + at * kStride + b];
    }
    *OutputOf(g, r0 + rr, b) = sum;
  }
}

// The cluster's partial sums of the block's rows, each output written once:
// every rank's totals into its own shared memory, pushed to the ranks that
// own them, and each rank adds its share of the rows over the ranks.
template <int NT, int WG>
__device__ __forceinline__ void SumOverCluster(const Bf16Gemv& g, int r0,
                                               const float (&total)[4 * NT],
                                               const Ring<NT, WG>& ring,
                                               int rank, int ranks) {
  using S = Smem<NT, WG>;
  float* partial = reinterpret_cast<float*>(ring.base);
  float* recv = reinterpret_cast<float*>(ring.base + S::kRecvOffset);
  if (threadIdx.x < kConsumers<WG>) KeepTotals<NT>(total, partial);
  if (ranks == 1) {
    __syncthreads();
    StoreShare<NT, WG>(g, r0, partial, recv, rank, ranks);
    return;
  }
  FenceProxyAsync();          // the partials, for the bulk copies' reads
  cg::this_cluster().sync();  // every rank's partials in, its ring drained
  if (threadIdx.x == 0) {
    PushPartials<NT, WG>(partial, recv, ring.sums_in(), rank, ranks);
  }
  MbarWait(ring.sums_in(), 0);
  StoreShare<NT, WG>(g, r0, partial, recv, rank, ranks);
  cg::this_cluster().sync();  // no rank leaves while its copies read it
}

// The block's plan: row block blockIdx.x / ranks, rank blockIdx.x % ranks's
// share of K's stages.
template <int WG>
__device__ __forceinline__ BlockPlan PlanOf(const Bf16Gemv& g, int r0, int rank,
                                            int ranks) {
  const int stages = g.k / kStageK;
  const int s_begin = rank * stages / ranks;
  return BlockPlan{r0 / g.rows_per_x, r0 % g.rows_per_x, s_begin * kStageK,
                   (rank + 1) * stages / ranks - s_begin};
}

// Block (row block, rank), warp-specialized: the copy warp keeps the ring
// full (TMA), the splitters turn each stage's raw inputs into wgmma's B,
// the consumers only wait on mbarriers and multiply; then the cluster's
// ranks add their partial sums.
template <int NT, int WG>
__global__ void __launch_bounds__(kThreads<WG>, 1)
    GemvBf16WgmmaKernel(const __grid_constant__ CUtensorMap w_map,
                        const __grid_constant__ CUtensorMap x_map, Bf16Gemv g,
                        int ranks) {
  using S = Smem<NT, WG>;
  extern __shared__ uint8_t smem_raw[];
  // The swizzled A slots want 1024-byte alignment (kBytes has the room);
  // an offset from the shared array, so accesses stay shared ones, not
  // generic (an address rounded through an integer loses that).
  uint8_t* smem = smem_raw + ((1024 - (SmemAddr(smem_raw) & 1023)) & 1023);
  const Ring<NT, WG> ring{smem};
  const int rank = blockIdx.x % ranks, r0 = (blockIdx.x / ranks) * kRows<WG>;
  const BlockPlan p = PlanOf<WG>(g, r0, rank, ranks);
  if (threadIdx.x == 0) {
    for (int i = 0; i < S::kStages; ++i) {
      MbarInit(ring.loaded(i), 1);
      MbarInit(ring.full(i), kSplitters / 32);
      MbarInit(ring.empty(i), kConsumers<WG> / 32);
    }
    MbarInit(ring.sums_in(), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  LetNextKernelStart();
  float total[4 * NT] = {};
  if (threadIdx.x < kConsumers<WG>) {
    WaitForPriorKernels();
    MultiplyStages<NT, WG>(p, ring, total);
  } else if (threadIdx.x < kConsumers<WG> + kSplitters) {
    WaitForPriorKernels();
    SplitStages<NT, WG>(p, ring);
  } else if (threadIdx.x == kConsumers<WG> + kSplitters) {
    IssueCopies<NT, WG>(&w_map, &x_map, p, ring);
  }
  __syncthreads();  // every stage consumed: the ring takes the partials
  SumOverCluster<NT, WG>(g, r0, total, ring, rank, ranks);
}

// K's split over a cluster of `ranks` blocks: the most (up to kMaxCluster)
// that keep the grid within one wave of `capacity` blocks, at least two
// stages a rank, and whose clusters all fit at once (`fits(r)`: the
// clusters of r blocks resident together). A grid of more row blocks than
// one wave takes no split.
template <typename ClustersFit>
int Ranks(int row_blocks, int stages, int capacity, ClustersFit fits) {
  int best = 1;
  for (int r = 2; r <= kMaxCluster; ++r) {
    if (stages < 2 * r || row_blocks * r > capacity) break;
    if (row_blocks <= fits(r)) best = r;
  }
  return best;
}

// The tensor maps of g's weights in boxes of `rows` rows (128-byte swizzle)
// and of its inputs in boxes of `seqs` sequences (rows_per_x set).
GpuStatus EncodeMaps(const Bf16Gemv& g, int rows, int seqs, CUtensorMap* w,
                     CUtensorMap* x) {
  RowsMap m;
  m.base = g.w + g.w_group_offset * g.k;
  m.k = m.row_stride = g.k;
  m.rows_per_group = g.rows_per_x;
  m.groups = (g.rows + g.rows_per_x - 1) / g.rows_per_x;
  m.group_stride = g.w_group_stride * g.k;
  m.box_rows = rows;
  m.swizzle_128 = true;
  MG_RETURN_IF_ERROR(EncodeRowsMap(m, w));
  m.base = g.x;
  m.bf16 = false;
  m.row_stride = g.x_stride;
  m.rows_per_group = g.batch;
  m.group_stride = g.x_group_stride;
  m.box_rows = seqs;
  m.swizzle_128 = false;
  return EncodeRowsMap(m, x);
}

// How many clusters of r blocks of `kernel` are resident at once.
template <typename Kernel>
int ClustersAtOnce(Kernel kernel, int threads, int smem, int r) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(r);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = r;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) !=
      cudaSuccess) {
    cudaGetLastError();  // clear it: this size is taken as not fitting
    return 0;
  }
  return clusters;
}

// A launch shape of the kernel for g: its ranks a row block, its grid, and
// the load that shapes are compared by, the rows x stages of a block times
// its waves (a wave's blocks run side by side on their SMs, a block's
// stages in turn; the SMs a grid leaves idle add nothing).
struct ShapePlan {
  int ranks = 1, blocks = 0;
  int64_t load = 0;  // rows x stages a block, times the waves
};

// Also raises the kernel's shared memory limit, which the occupancy
// queries and the launch need.
template <int NT, int WG>
GpuStatus PlanShape(const Bf16Gemv& g, ShapePlan* p) {
  using S = Smem<NT, WG>;
  static std::atomic<size_t> allowed{0};
  static std::atomic<int> per_sm{0};  // the same on every device (sm_90)
  static std::atomic<int> clusters[kMaxCluster + 1] = {};
  auto* kernel = &GemvBf16WgmmaKernel<NT, WG>;
  MG_RETURN_IF_ERROR(AllowSharedMemory(kernel, S::kBytes, &allowed));
  if (per_sm.load() == 0) {
    int blocks = 0;
    MG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, kernel, kThreads<WG>, S::kBytes));
    per_sm = std::max(blocks, 1);
  }
  const auto fits = [&](int r) {
    if (clusters[r].load() == 0) {  // -1: none fit
      const int n = ClustersAtOnce(kernel, kThreads<WG>, S::kBytes, r);
      clusters[r] = n > 0 ? n : -1;
    }
    return clusters[r].load();
  };
  const int capacity = per_sm * CurrentDeviceSmCount();
  const int row_blocks = (g.rows + kRows<WG> - 1) / kRows<WG>;
  const int stages = g.k / kStageK;
  p->ranks = Ranks(row_blocks, stages, capacity, fits);
  p->blocks = row_blocks * p->ranks;
  const int waves = (p->blocks + capacity - 1) / capacity;
  p->load = int64_t{waves} * kRows<WG> * ((stages + p->ranks - 1) / p->ranks);
  return OkStatus();
}

// p from PlanShape<NT, WG>(g).
template <int NT, int WG>
GpuStatus LaunchShape(const Bf16Gemv& g, const ShapePlan& p,
                      cudaStream_t stream, const LaunchPolicy& policy) {
  using S = Smem<NT, WG>;
  auto* kernel = &GemvBf16WgmmaKernel<NT, WG>;
  CUtensorMap w_map, x_map;
  MG_RETURN_IF_ERROR(EncodeMaps(g, kRows<WG>, S::kSeqs, &w_map, &x_map));
  const dim3 grid(p.blocks);
  if (p.ranks == 1) {
    return LaunchOverlapped(kernel, grid, dim3(kThreads<WG>), S::kBytes, stream,
                            policy, w_map, x_map, g, p.ranks);
  }
  return LaunchOverlappedInClusters(kernel, grid, dim3(kThreads<WG>), S::kBytes,
                                    stream, policy, p.ranks, w_map, x_map, g,
                                    p.ranks);
}

// Whether blocks of WG warpgroups (64 WG rows) stay inside g's input groups.
template <int WG>
bool BlocksFit(const Bf16Gemv& g) {
  return g.rows_per_x >= g.rows || g.rows_per_x % kRows<WG> == 0;
}

// The warpgroups a block of g's launch (1, 2 or 3) and its plan: two or
// three where a block stays inside one input group (the inputs' split
// shared by more rows), three where they leave less for the busiest SM.
// On an H200: the input projections' 2784 x 6144 in 15 blocks of 192 rows
// in clusters of 8 (12 stages a block) against 22 of 128 in clusters of 5
// (20 stages); lm_head's 19360 rows in one wave of 101 blocks against two
// of 152. o_proj's 6144 rows keep 48 blocks of 128 in clusters of 2 (32 of
// 192 would want clusters of 4, and fewer than 32 of those fit at once).
template <int NT>
GpuStatus ChooseShape(const Bf16Gemv& g, int* warpgroups, ShapePlan* plan) {
  if (!BlocksFit<2>(g)) {
    *warpgroups = 1;
    return PlanShape<NT, 1>(g, plan);
  }
  *warpgroups = 2;
  MG_RETURN_IF_ERROR((PlanShape<NT, 2>(g, plan)));
  if (!BlocksFit<3>(g)) return OkStatus();
  ShapePlan three;
  MG_RETURN_IF_ERROR((PlanShape<NT, 3>(g, &three)));
  if (three.load < plan->load) {
    *warpgroups = 3;
    *plan = three;
  }
  return OkStatus();
}

template <int NT>
GpuStatus LaunchNt(const Bf16Gemv& g, cudaStream_t stream,
                   const LaunchPolicy& policy) {
  int warpgroups = 0;
  ShapePlan p;
  MG_RETURN_IF_ERROR(ChooseShape<NT>(g, &warpgroups, &p));
  switch (warpgroups) {
    case 1:
      return LaunchShape<NT, 1>(g, p, stream, policy);
    case 2:
      return LaunchShape<NT, 2>(g, p, stream, policy);
  }
  return LaunchShape<NT, 3>(g, p, stream, policy);
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

// f(std::integral_constant<int, NT>) for the n-tiles of 8 sequences that
// g's batch takes: 1 up to 8 sequences, 2 up to 16, else 4.
template <class F>
GpuStatus WithNTiles(const Bf16Gemv& g, F&& f) {
  if (g.batch <= 8) return f(std::integral_constant<int, 1>{});
  if (g.batch <= 16) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 4>{});
}

}  // namespace

bool GemvBf16WgmmaFits(const Bf16Gemv& g) {
  return g.batch >= 1 && g.batch <= kGemvWgmmaMaxBatch && g.k > 0 &&
         gemv_mma::Fits(g, kStageK, kRows<1>) &&
         reinterpret_cast<uintptr_t>(g.w) % 16 == 0 && DeviceHasWgmma();
}

GpuStatus LaunchGemvBf16Wgmma(const Bf16Gemv& g, cudaStream_t stream,
                              const LaunchPolicy& policy) {
  return WithNTiles(g, [&](auto nt) {
    return LaunchNt<decltype(nt)::value>(g, stream, policy);
  });
}

int GemvBf16WgmmaWarpgroups(const Bf16Gemv& g) {
  int warpgroups = 0;
  ShapePlan p;
  const GpuStatus chosen = WithNTiles(g, [&](auto nt) {
    return ChooseShape<decltype(nt)::value>(g, &warpgroups, &p);
  });
  return chosen.ok() ? warpgroups : 0;
}

}  // namespace moetune::gpu
