// The DSA indexer's top-k (mla.cuh LaunchTopK). Up to 8192 scores a
// sequence (the step's 4096-token context): one block, one pass of 13-bit
// digits and a rank of the keys in the k-th key's bin (FastTopKKernel).
// Past that, a radix select of the k-th largest score, 8 bits a pass from
// the most significant, then every index at or above it written in order.
// A sequence's scores are split over a cluster of blocks (each stages and
// counts its slice; every block sums the cluster's histograms from their
// shared memory, so all pick the same digit), at long contexts: one block a
// sequence is bound by one SM's issue (ncu: 32 warps, 1.1 eligible a
// scheduler, 17 cycles an instruction) and takes 41 us a layer at 32768
// tokens, 3.2 ms of an 11.2 ms batch-1 step.
// Copying the keys holding a pass's prefix to lists of their own does not
// shorten it. Launch-only; not thread-safe.
#include <cooperative_groups.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kSelectThreads = 1024;
constexpr int kClusterBlocks = 8;  // the portable cluster size
// Scores a sequence from which a cluster selects: at 32768 tokens it makes
// the TP8 step 9.38 ms against one block's 11.45 at batch 1 and 18.88
// against 21.07 at batch 8, but at 4096 one block a sequence is faster
// (batch 1 by 0.2 ms, batch 32 by 1.2 ms: 256 blocks of 1024 threads and
// their cluster barriers for 4097 scores each; measured alternating twice).
constexpr int kClusterMinScores = 8192;

// Floats ordered as unsigned integers (larger float, larger key).
__device__ __forceinline__ uint32_t OrderKey(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Warp 0 over a 256-bin histogram: the largest digit d with at least
// `remaining` keys at or above it, and how many of d's keys are still
// wanted (remaining minus the keys above d). A lane owns 8 bins; suffix
// sums over lanes find the one lane that holds d, which walks its bins.
// Returns the new remaining in that lane (*digit = d), -1 digit elsewhere.
__device__ int DigitHolding(const int* hist, int remaining, int* digit) {
  const int lane = threadIdx.x & 31;
  int own = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) own += hist[lane * 8 + j];
  int above_and_own = own;  // keys in lanes >= this one
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_down_sync(0xffffffffu, above_and_own, o);
    if (lane + o < 32) above_and_own += up;
  }
  int above = above_and_own - own;
  *digit = -1;
  if (above >= remaining || (above_and_own < remaining && lane != 0)) {
    return remaining;
  }
  for (int j = 7; j >= 0; --j) {
    const int count = hist[lane * 8 + j];
    if (above + count >= remaining || j == 0) {
      *digit = lane * 8 + j;
      return remaining - above;
    }
    above += count;
  }
  return remaining;
}

// Where the top-k reads its keys: staged in shared memory (the scores read
// once, kTopKLoads loads in flight a thread) or, for a context past
// kTopKStagedMax, from the scores in each pass.
constexpr int kTopKLoads = 8;
constexpr int kTopKStagedMax = 50 * 1024;  // 200 KB of keys

template <bool kStaged>
struct TopKKeys {
  const float* scores;
  const uint32_t* staged;
  __device__ uint32_t operator()(int i) const {
    return kStaged ? staged[i] : OrderKey(scores[i]);
  }
};

__device__ void StageKeys(const float* scores, int n, uint32_t* keys) {
  for (int base = threadIdx.x; base < n; base += kTopKLoads * blockDim.x) {
    float loaded[kTopKLoads];
#pragma unroll
    for (int u = 0; u < kTopKLoads; ++u) {
      const int i = base + u * blockDim.x;
      loaded[u] = i < n ? scores[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kTopKLoads; ++u) {
      const int i = base + u * blockDim.x;
      if (i < n) keys[i] = OrderKey(loaded[u]);
    }
  }
  __syncthreads();
}

// Where a pass's digit counts are whole: one block's own histogram, or
// every block of the cluster summing all the blocks' (the same sums in
// each, so all pick the same digit).
struct OneBlock {
  __device__ const int* Total(const int* hist, int* /*total*/) const {
    return hist;
  }
};
struct WholeCluster {
  __device__ const int* Total(int* hist, int* total) const {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's counts are in
    const int blocks = static_cast<int>(cluster.num_blocks());
    for (int d = threadIdx.x; d < 256; d += blockDim.x) {
      int sum = 0;
      for (int r = 0; r < blocks; ++r)
        sum += cluster.map_shared_rank(hist, r)[d];
      total[d] = sum;
    }
    __syncthreads();
    return total;
  }
};

// The k-th largest key among n (radix select, 8 bits a pass, most
// significant first); *equal_taken = how many keys equal to it are kept.
// Passes alternate between the two halves of hists[512], so that a
// cluster's blocks may still read a pass's counts while the next is made
// (the one after waits at the cluster barrier for every block).
template <typename Keys, typename Counts>
__device__ uint32_t KthKey(const Keys& keys, int n, int k, int* hists,
                           int* total, int* equal_taken, Counts counts) {
  __shared__ uint32_t prefix_s;
  __shared__ int remaining_s;
  if (threadIdx.x == 0) {
    prefix_s = 0;
    remaining_s = k;
  }
  uint32_t mask = 0;
  for (int pass = 0, shift = 24; shift >= 0; ++pass, shift -= 8) {
    int* hist = hists + (pass & 1) * 256;
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = prefix_s;
    // Lanes with the same digit add once (most scores share their top
    // bytes: plain atomics on one bin would serialize the whole pass).
    for (int base = 0; base < n; base += blockDim.x) {
      const int i = base + threadIdx.x;
      const uint32_t key = i < n ? keys(i) : 0;
      const int digit =
          (i < n && (key & mask) == prefix) ? int((key >> shift) & 255u) : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) {
        atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    const int* whole = counts.Total(hist, total);
    if (threadIdx.x < 32) {
      const int wanted = remaining_s;
      int digit = 0;
      const int remaining = DigitHolding(whole, wanted, &digit);
      __syncwarp();  // every lane has read remaining_s before one writes it
      if (digit >= 0) {
        remaining_s = remaining;
        prefix_s = prefix | (static_cast<uint32_t>(digit) << shift);
      }
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  *equal_taken = remaining_s;
  return prefix_s;
}

// Exclusive prefix sum of `flag` over the block; *total = the block's sum.
__device__ int BlockExclusiveScan(int flag, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = flag;
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int v = lane < blockDim.x / 32 ? scratch[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += up;
    }
    scratch[lane] = v;  // inclusive warp totals
  }
  __syncthreads();
  *total = scratch[blockDim.x / 32 - 1];
  return inclusive - flag + (warp > 0 ? scratch[warp - 1] : 0);
}

// Writes the indices of the keys above kth and of the first equal_quota
// keys equal to it, in ascending order: each thread counts a contiguous run
// of the keys, a block scan places the runs (a scan per 1024 keys would
// cost ~20 block barriers at 4096 tokens). Below 2^16 keys both counts go
// through one scan, packed in halves of an int (the keys above never carry
// into the equal keys' half).
// Indices are written plus index_base; *kept_n (when not null) = kept_before
// + the keys this block keeps.
template <typename Keys>
__device__ void WriteKept(const Keys& keys, int n, uint32_t kth,
                          int equal_quota, int* scratch, int* out,
                          int index_base, int kept_before, int* kept_n) {
  const int per = (n + blockDim.x - 1) / blockDim.x;
  const int lo = min(n, static_cast<int>(threadIdx.x) * per);
  const int hi = min(n, lo + per);
  int above = 0, equal = 0;
  for (int i = lo; i < hi; ++i) {
    const uint32_t key = keys(i);
    above += key > kth;
    equal += key == kth;
  }
  int above_before = 0, equal_before = 0, above_total = 0, equal_total = 0;
  if (n < (1 << 16)) {
    int total = 0;
    const int before =
        BlockExclusiveScan((equal << 16) | above, scratch, &total);
    above_before = before & 0xffff;
    equal_before = before >> 16;
    above_total = total & 0xffff;
    equal_total = total >> 16;
  } else {
    equal_before = BlockExclusiveScan(equal, scratch, &equal_total);
    above_before = BlockExclusiveScan(above, scratch, &above_total);
  }
  // The equal keys are kept first come: the runs before this one took
  // min(equal_before, equal_quota) of them.
  const int equal_kept = max(0, min(equal, equal_quota - equal_before));
  int at = above_before + min(equal_before, equal_quota);
  for (int i = lo, equal_seen = 0; i < hi; ++i) {
    const uint32_t key = keys(i);
    const bool equal_here = key == kth && equal_seen++ < equal_kept;
    if (key > kth || equal_here) out[at++] = index_base + i;
  }
  if (threadIdx.x == 0 && kept_n != nullptr) {
    *kept_n = kept_before + above_total + min(equal_total, equal_quota);
  }
}

// This block's keys above kth and equal to it, into counts[0] and [1].
template <typename Keys>
__device__ void CountAround(const Keys& keys, int n, uint32_t kth,
                            int* counts) {
  if (threadIdx.x == 0) counts[0] = counts[1] = 0;
  __syncthreads();
  int above = 0, equal = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const uint32_t key = keys(i);
    above += key > kth;
    equal += key == kth;
  }
  above = __reduce_add_sync(0xffffffffu, above);
  equal = __reduce_add_sync(0xffffffffu, equal);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&counts[0], above);
    atomicAdd(&counts[1], equal);
  }
}

// Indices 0..n-1 when every score is kept.
__device__ void KeepAll(int n, int* out, int* kept_n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = i;
  if (threadIdx.x == 0) *kept_n = n;
}

// One block a sequence reading its scores in every pass: past
// kFastMaxScores where no cluster takes the scores (more than its blocks
// stage, or n <= k).
__global__ void TopKKernel(const float* all_scores, int n, int k, int* kept,
                           int* kept_n) {
  EnterAfterPriorKernels();
  __shared__ int hists[2 * 256];
  __shared__ int scratch[32];
  const float* scores = all_scores + static_cast<int64_t>(blockIdx.x) * n;
  int* out = kept + static_cast<int64_t>(blockIdx.x) * k;
  if (n <= k) return KeepAll(n, out, kept_n + blockIdx.x);
  const TopKKeys<false> keys{scores, nullptr};
  int equal_quota = 0;
  const uint32_t kth =
      KthKey(keys, n, k, hists, nullptr, &equal_quota, OneBlock{});
  WriteKept(keys, n, kth, equal_quota, scratch, out, 0, 0, kept_n + blockIdx.x);
}

// The select up to kFastMaxScores keys (the step's 4096-token context): one
// pass of 13-bit digits into 8192 bins finds the bin that holds the k-th
// key; the keys in that bin (the candidates: a few dozen where scores
// spread) are ranked against one another; one scan places the kept
// indices. About 10 block barriers where the radix select takes ~20 and
// waits four times on warp 0's digit search (11 us a layer at batch 1,
// 10 % of the step). More than kFastRankMax candidates (scores bunched in
// one bin) take the radix select's passes.
constexpr int kFastMaxScores = 8192;
constexpr int kFastKeysPerThread = kFastMaxScores / kSelectThreads;
constexpr int kFastDigitShift = 32 - 13;
constexpr int kFastBins = 1 << 13;
constexpr int kFastBinsPerThread = kFastBins / kSelectThreads;
constexpr int kFastRankMax = kSelectThreads;

// Dynamic shared memory of FastTopKKernel: bins, candidates, then n keys.
size_t FastTopKSharedBytes(int n) {
  return sizeof(uint32_t) * (kFastBins + kFastRankMax + n);
}

// The bin holding the k-th largest key: thread t sums the eight bins
// kFastBins - 8(t + 1).. (thread 0 the highest), a block scan counts the
// keys in the bins above each thread's, and the one thread whose bins hold
// the k-th walks them down. *remaining_s = k minus the keys above the bin.
__device__ void FindKthBin(const int* hist, int k, int* scratch, int* digit_s,
                           int* remaining_s) {
  const int first = kFastBins - kFastBinsPerThread * (threadIdx.x + 1);
  const int4 lo = reinterpret_cast<const int4*>(hist + first)[0];
  const int4 hi = reinterpret_cast<const int4*>(hist + first)[1];
  const int bins[kFastBinsPerThread] = {lo.x, lo.y, lo.z, lo.w,
                                        hi.x, hi.y, hi.z, hi.w};
  int own = 0;
#pragma unroll
  for (int j = 0; j < kFastBinsPerThread; ++j) own += bins[j];
  int total = 0;
  int above = BlockExclusiveScan(own, scratch, &total);
  if (above < k && k <= above + own) {
    for (int j = kFastBinsPerThread - 1; j >= 0; --j) {
      if (above + bins[j] >= k) {
        *digit_s = first + j;
        *remaining_s = k - above;
        break;
      }
      above += bins[j];
    }
  }
  __syncthreads();
}

// Among c <= blockDim.x candidates, the remaining-th largest key and how
// many keys equal to it are kept: thread t ranks candidate t against all
// (the same candidate read by every thread at once: a broadcast); of equal
// candidates only the first in the list writes.
__device__ void RankCandidates(const uint32_t* candidates, int c, int remaining,
                               uint32_t* kth_s, int* equal_quota_s) {
  const int t = threadIdx.x;
  if (t >= c) return;
  const uint32_t v = candidates[t];
  int greater = 0, equal = 0, equal_before = 0;
  for (int j = 0; j < c; ++j) {
    const uint32_t x = candidates[j];
    greater += x > v;
    equal += x == v;
    equal_before += (x == v) & (j < t);
  }
  if (equal_before == 0 && greater < remaining &&
      remaining <= greater + equal) {
    *kth_s = v;
    *equal_quota_s = remaining - greater;
  }
}

__global__ void __launch_bounds__(kSelectThreads)
    FastTopKKernel(const float* all_scores, int n, int k, int* kept,
                   int* kept_n) {
  extern __shared__ uint32_t fast_shared[];
  int* hist = reinterpret_cast<int*>(fast_shared);
  uint32_t* candidates = fast_shared + kFastBins;
  uint32_t* keys = candidates + kFastRankMax;
  __shared__ int scratch[32], digit_s, remaining_s, candidates_n, quota_s;
  __shared__ uint32_t kth_s;
  // Nothing here depends on the kernels before: clear while they finish.
  for (int i = threadIdx.x; i < kFastBins; i += blockDim.x) hist[i] = 0;
  if (threadIdx.x == 0) candidates_n = 0;
  EnterAfterPriorKernels();
  const float* scores = all_scores + static_cast<int64_t>(blockIdx.x) * n;
  int* out = kept + static_cast<int64_t>(blockIdx.x) * k;
  if (n <= k) return KeepAll(n, out, kept_n + blockIdx.x);
  uint32_t own[kFastKeysPerThread];
#pragma unroll
  for (int j = 0; j < kFastKeysPerThread; ++j) {
    const int i = threadIdx.x + j * kSelectThreads;
    own[j] = i < n ? OrderKey(scores[i]) : 0u;
  }
  __syncthreads();  // the bins are clear
#pragma unroll
  for (int j = 0; j < kFastKeysPerThread; ++j) {
    const int i = threadIdx.x + j * kSelectThreads;
    if (i < n) {
      keys[i] = own[j];
      atomicAdd(&hist[own[j] >> kFastDigitShift], 1);
    }
  }
  __syncthreads();
  FindKthBin(hist, k, scratch, &digit_s, &remaining_s);
  const uint32_t digit = digit_s;
#pragma unroll
  for (int j = 0; j < kFastKeysPerThread; ++j) {
    const int i = threadIdx.x + j * kSelectThreads;
    if (i < n && own[j] >> kFastDigitShift == digit) {
      const int at = atomicAdd(&candidates_n, 1);
      if (at < kFastRankMax) candidates[at] = own[j];
    }
  }
  __syncthreads();
  const TopKKeys<true> staged{scores, keys};
  uint32_t kth = 0;
  int equal_quota = 0;
  if (candidates_n <= kFastRankMax) {
    RankCandidates(candidates, candidates_n, remaining_s, &kth_s, &quota_s);
    __syncthreads();
    kth = kth_s;
    equal_quota = quota_s;
  } else {
    kth = KthKey(staged, n, k, hist, nullptr, &equal_quota, OneBlock{});
  }
  WriteKept(staged, n, kth, equal_quota, scratch, out, 0, 0,
            kept_n + blockIdx.x);
}

// A cluster of blocks a sequence, block r staging and selecting over
// slice r of the scores; each writes its slice's kept indices after those
// of the slices before it (their counts read from their shared memory).
__global__ void __launch_bounds__(kSelectThreads)
    ClusterTopKKernel(const float* all_scores, int n, int k, int* kept,
                      int* kept_n) {
  EnterAfterPriorKernels();
  extern __shared__ uint32_t slice_keys[];
  __shared__ int hists[2 * 256], total[256], scratch[32], around[2];
  cg::cluster_group cluster = cg::this_cluster();
  const int blocks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int sequence = blockIdx.x / blocks;
  const float* scores = all_scores + static_cast<int64_t>(sequence) * n;
  int* out = kept + static_cast<int64_t>(sequence) * k;
  const int per = (n + blocks - 1) / blocks;
  const int lo = min(n, rank * per), m = min(n, lo + per) - lo;
  StageKeys(scores + lo, m, slice_keys);
  const TopKKeys<true> keys{scores + lo, slice_keys};
  int equal_quota = 0;
  const uint32_t kth =
      KthKey(keys, m, k, hists, total, &equal_quota, WholeCluster{});
  CountAround(keys, m, kth, around);
  cluster.sync();
  int above_before = 0, equal_before = 0;
  for (int r = 0; r < rank; ++r) {
    const int* c = cluster.map_shared_rank(around, r);
    above_before += c[0];
    equal_before += c[1];
  }
  const int kept_before = above_before + min(equal_quota, equal_before);
  WriteKept(keys, m, kth, max(0, equal_quota - equal_before), scratch,
            out + kept_before, lo, kept_before,
            rank == blocks - 1 ? kept_n + sequence : nullptr);
  cluster.sync();  // no block leaves while another reads its counts
}

}  // namespace

GpuStatus LaunchTopK(const float* scores, int n, int k, int batch, int* kept,
                     int* kept_n, cudaStream_t stream,
                     const LaunchPolicy& policy) {
  const int per_block = (n + kClusterBlocks - 1) / kClusterBlocks;
  if (n > kClusterMinScores && n > k && per_block <= kTopKStagedMax) {
    const size_t smem = sizeof(uint32_t) * per_block;
    static std::atomic<size_t> allowed{48 * 1024};
    MG_RETURN_IF_ERROR(AllowSharedMemory(ClusterTopKKernel, smem, &allowed));
    return LaunchOverlappedInClusters(
        ClusterTopKKernel, batch * kClusterBlocks, kSelectThreads, smem, stream,
        policy, kClusterBlocks, scores, n, k, kept, kept_n);
  }
  if (n > kFastMaxScores) {
    return LaunchOverlapped(TopKKernel, batch, kSelectThreads, 0, stream,
                            policy, scores, n, k, kept, kept_n);
  }
  const size_t smem = FastTopKSharedBytes(n);
  static std::atomic<size_t> allowed{48 * 1024};
  MG_RETURN_IF_ERROR(AllowSharedMemory(FastTopKKernel, smem, &allowed));
  return LaunchOverlapped(FastTopKKernel, batch, kSelectThreads, smem, stream,
                          policy, scores, n, k, kept, kept_n);
}

}  // namespace moetune::gpu
