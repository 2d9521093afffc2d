// The DSA indexer's top-k (mla.cuh LaunchTopK): one block a sequence, a
// radix select of the k-th largest score, 8 bits a pass from the most
// significant, then every index at or above it written in order. At 32768
// tokens and batch 1 it takes 41 us a layer, 3.2 ms of an 11.2 ms step
// (device run 78); copying the keys that hold a pass's prefix to lists of
// their own, so that later passes read only those, did not shorten it
// (run 79: 3.25 ms, and 0.11 ms more at 4096 tokens). Launch-only; not
// thread-safe.
#include <atomic>
#include <cstdint>

#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

constexpr int kSelectThreads = 1024;

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

// The k-th largest key among n (radix select, 8 bits a pass, most
// significant first); *equal_taken = how many keys equal to it are kept.
template <typename Keys>
__device__ uint32_t KthKey(const Keys& keys, int n, int k, int* hist,
                           int* equal_taken) {
  __shared__ uint32_t prefix_s;
  __shared__ int remaining_s;
  if (threadIdx.x == 0) {
    prefix_s = 0;
    remaining_s = k;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
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
    if (threadIdx.x < 32) {
      const int wanted = remaining_s;
      int digit = 0;
      const int remaining = DigitHolding(hist, wanted, &digit);
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
// of the keys, two block scans place the runs (a scan per 1024 keys, as
// before, cost ~20 block barriers at 4096 tokens).
template <typename Keys>
__device__ void WriteKept(const Keys& keys, int n, uint32_t kth,
                          int equal_quota, int* scratch, int* out,
                          int* kept_n) {
  const int per = (n + blockDim.x - 1) / blockDim.x;
  const int lo = min(n, static_cast<int>(threadIdx.x) * per);
  const int hi = min(n, lo + per);
  int above = 0, equal = 0;
  for (int i = lo; i < hi; ++i) {
    const uint32_t key = keys(i);
    above += key > kth;
    equal += key == kth;
  }
  int equal_total = 0, keep_total = 0;
  const int equal_before = BlockExclusiveScan(equal, scratch, &equal_total);
  const int equal_kept = max(0, min(equal, equal_quota - equal_before));
  int at = BlockExclusiveScan(above + equal_kept, scratch, &keep_total);
  for (int i = lo, equal_seen = 0; i < hi; ++i) {
    const uint32_t key = keys(i);
    const bool equal_here = key == kth && equal_seen++ < equal_kept;
    if (key > kth || equal_here) out[at++] = i;
  }
  if (threadIdx.x == 0) *kept_n = keep_total;
}

// One block a sequence; kStaged: its keys in dynamic shared memory.
template <bool kStaged>
__global__ void TopKKernel(const float* all_scores, int n, int k, int* kept,
                           int* kept_n) {
  EnterAfterPriorKernels();
  extern __shared__ uint32_t staged_keys[];
  __shared__ int hist[256];
  __shared__ int scratch[32];
  const float* scores = all_scores + static_cast<int64_t>(blockIdx.x) * n;
  int* out = kept + static_cast<int64_t>(blockIdx.x) * k;
  if (n <= k) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = i;
    if (threadIdx.x == 0) kept_n[blockIdx.x] = n;
    return;
  }
  if (kStaged) StageKeys(scores, n, staged_keys);
  const TopKKeys<kStaged> keys{scores, staged_keys};
  int equal_quota = 0;
  const uint32_t kth = KthKey(keys, n, k, hist, &equal_quota);
  WriteKept(keys, n, kth, equal_quota, scratch, out, kept_n + blockIdx.x);
}

}  // namespace

GpuStatus LaunchTopK(const float* scores, int n, int k, int batch, int* kept,
                     int* kept_n, cudaStream_t stream) {
  if (n > kTopKStagedMax) {
    return LaunchOverlapped(TopKKernel<false>, batch, kSelectThreads, 0, stream,
                            scores, n, k, kept, kept_n);
  }
  const size_t smem = sizeof(uint32_t) * n;
  static std::atomic<size_t> allowed{48 * 1024};
  MG_RETURN_IF_ERROR(AllowSharedMemory(TopKKernel<true>, smem, &allowed));
  return LaunchOverlapped(TopKKernel<true>, batch, kSelectThreads, smem, stream,
                          scores, n, k, kept, kept_n);
}

}  // namespace moetune::gpu
