// The router of a few tokens (router_parts.cuh, router.cu picks it): the
// logits on tensor cores in clusters.
#include "kernels/cuda/moe/router_parts.cuh"

namespace moetune::gpu {
namespace {

// Batches of router.cu's kFewTokens to kManyTokens - 1: the logits on tensor
// cores in clusters of kFewSplit blocks, a cluster a tile of 8 experts for
// every token (kM m-tiles of 16), each block a kFewSplit-th of K, its warps
// 64-K chunks in turn. The one-kernel router's blocks (one an expert) each
// read every token's input from L2 (at 32 tokens 256 x 384 KB); here each
// block reads its quarter once. The weights are loaded before the wait; a
// block's warps' sums and then the cluster's ranks' are added in a fixed
// order; rank 0 writes the scores and takes the ticket, and the last
// cluster's rank 0 picks every token's experts.
constexpr int kFewSplit = 4;
constexpr int kFewWarps = kThreads / 32;
constexpr int kFewChunks = kRouterMaxHidden / 64 / kFewSplit / kFewWarps;

template <int kM>
struct FewShared {
  RouterShared tail;
  float part[kFewWarps][kM * 128];   // a warp's accumulators, lane-major
  float ranks[kFewSplit][kM * 128];  // rank 0's: each rank's warps' sum
};

// This warp's products over its chunks of the block's K range into d[m] (m-
// tile m's tokens 16 m + g and + 8, experts e0 + 2 c and + 1); b holds its
// weights (chunk u: q_lo + warp + kFewWarps u).
template <int kM>
__device__ __forceinline__ void FewProducts(const RouterParams& p, int q_lo,
                                            int q_hi,
                                            const uint32_t (&b)[kFewChunks][8],
                                            float (&d)[kM][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const int ta = min(16 * m + g, p.batch - 1);
    const int tb = min(16 * m + g + 8, p.batch - 1);
    const uint16_t* xa = p.buf.x_bf16 + static_cast<int64_t>(ta) * p.hidden;
    const uint16_t* xb = p.buf.x_bf16 + static_cast<int64_t>(tb) * p.hidden;
#pragma unroll
    for (int u = 0; u < kFewChunks; ++u) {
      const int q = q_lo + warp + kFewWarps * u;
      if (q >= q_hi) break;
      uint32_t lo[8], hi[8];
      LoadChunk(xa, q, c, lo);
      LoadChunk(xb, q, c, hi);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t a[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1],
                               hi[2 * s + 1]};
        MmaBf16(d[m], a, b[u][2 * s], b[u][2 * s + 1]);
      }
    }
  }
}

// The cluster's sums (warps, then ranks, in order) as rank 0's scores. The
// other ranks push theirs into rank 0's shared memory and, needed no more,
// do the side work before they leave (off the tail's path).
template <int kM>
__device__ void FewClusterScores(const RouterParams& p, FewShared<kM>& sh,
                                 const float (&d)[kM][4], int rank, int e0) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sh.part[warp][m * 128 + lane * 4 + i] = d[m][i];
  }
  __syncthreads();
  cg::cluster_group cluster = cg::this_cluster();
  float* to = cluster.map_shared_rank(sh.ranks[rank], 0);
  for (int v = threadIdx.x; v < kM * 128; v += kThreads) {
    float sum = 0.0f;
    for (int w = 0; w < kFewWarps; ++w) sum += sh.part[w][v];
    to[v] = sum;
  }
  auto token = cluster.barrier_arrive();  // releases the pushed sums
  if (rank != 0) {
    SideWork(p, (kFewSplit - 1) * (blockIdx.x / kFewSplit) + rank - 1,
             (kFewSplit - 1) * (gridDim.x / kFewSplit));
    cluster.barrier_wait(std::move(token));
    return;
  }
  cluster.barrier_wait(std::move(token));  // every rank's sums are in
  for (int v = threadIdx.x; v < kM * 128; v += kThreads) {
    float sum = 0.0f;
    for (int r = 0; r < kFewSplit; ++r) sum += sh.ranks[r][v];
    const int ln = (v / 4) % 32, i = v % 4;
    const int t = 16 * (v / 128) + ln / 4 + (i >= 2 ? 8 : 0);
    const int e = e0 + 2 * (ln % 4) + i % 2;
    if (t < p.batch) {
      p.buf.logits[static_cast<int64_t>(t) * p.experts + e] =
          1.0f / (1.0f + expf(-sum));
    }
  }
}

// From 17 tokens the last cluster's four blocks pick the tokens' experts, a
// warp a token (at 32 tokens one each; in one block four a warp, one after
// another, take ~10.5 us of the router's ~17.6); rank 0 keeps the counts and
// the picks' copies in its shared memory and builds the tables.
template <int kM>
__device__ void ClusterTail(const RouterParams& p, FewShared<kM>& sh,
                            const float (&bias)[kPerLane], int rank,
                            int clusters) {
  cg::cluster_group cluster = cg::this_cluster();
  if (rank == 0) {
    ZeroCounts(sh.tail);  // before any rank's picks count in it
    const bool last = IsLastBlock(p, sh.tail, clusters);
    if (threadIdx.x < kFewSplit)  // each rank's own copy of the verdict
      *cluster.map_shared_rank(&sh.tail.last, threadIdx.x) = last ? 1 : 0;
  }
  cluster.sync();  // every rank knows; rank 0's counts are zero
  if (!sh.tail.last) return;
  if (rank == 0 && threadIdx.x == 0) *p.buf.router_counter = 0;
  RouterShared& tables = *cluster.map_shared_rank(&sh.tail, 0);
  const int warp = threadIdx.x / 32;
  for (int t = rank * kFewWarps + warp; t < p.batch;
       t += kFewSplit * kFewWarps) {
    SelectTopK(p, sh.tail, t, bias);
    FinishTopKInto(p, sh.tail, tables, t, warp);
  }
  cluster.sync();  // every rank's picks are in rank 0's tables
  if (rank == 0) SlotsTail(p, sh.tail);
}

template <int kM>
__global__ void __launch_bounds__(kThreads)
    FewTokenRouterKernel(RouterParams p) {
  __shared__ FewShared<kM> sh;
  float bias[kPerLane];
  LaneBiases(p, bias);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rank = static_cast<int>(blockIdx.x) % kFewSplit;
  const int e0 = static_cast<int>(blockIdx.x) / kFewSplit * 8;
  const int chunks = p.hidden / 64;
  const int q_lo = rank * chunks / kFewSplit;
  const int q_hi = (rank + 1) * chunks / kFewSplit;
  const uint16_t* wr = p.w + static_cast<int64_t>(e0 + lane / 4) * p.hidden;
  uint32_t b[kFewChunks][8];
#pragma unroll
  for (int u = 0; u < kFewChunks; ++u) {
    const int q = q_lo + warp + kFewWarps * u;
    if (q < q_hi) LoadChunk(wr, q, lane % 4, b[u]);
  }
  WaitForPriorKernels();  // as the one-kernel routers RouterKernel
  LetNextKernelStart();
  float d[kM][4] = {};
  FewProducts<kM>(p, q_lo, q_hi, b, d);
  FewClusterScores<kM>(p, sh, d, rank, e0);
  // Rank 0s take the tickets.
  const int clusters = static_cast<int>(gridDim.x) / kFewSplit;
  if constexpr (kM > 1) {
    ClusterTail<kM>(p, sh, bias, rank, clusters);
  } else if (rank == 0 && IsLastBlock(p, sh.tail, clusters)) {
    if (threadIdx.x == 0) *p.buf.router_counter = 0;
    FewTokenTail<2>(p, sh.tail, bias);
  }
}

template <int kM>
GpuStatus LaunchClusters(const RouterParams& p, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  return LaunchOverlappedInClusters(FewTokenRouterKernel<kM>,
                                    p.experts / 8 * kFewSplit, kThreads, 0,
                                    stream, policy, kFewSplit, p);
}

}  // namespace

GpuStatus LaunchFewTokenRouter(const LayerArgs& args, cudaStream_t stream) {
  const RouterParams p = ParamsOf(args);
  switch ((p.batch + 15) / 16) {
    case 1:
      return LaunchClusters<1>(p, stream, args.launch);
    case 2:
      return LaunchClusters<2>(p, stream, args.launch);
    case 3:
      return LaunchClusters<3>(p, stream, args.launch);
    default:
      return LaunchClusters<4>(p, stream, args.launch);
  }
}

}  // namespace moetune::gpu
