// The one-shot all-reduce kernel (oneshot.cuh says how it synchronises;
// oneshot_order.h, in what order it sums).
#include "kernels/cuda/comm/oneshot.cuh"

namespace moetune::gpu {
namespace {

__device__ __forceinline__ void StoreRelease(uint32_t* at, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(at), "r"(value)
               : "memory");
}

__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* at) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
               : "=r"(value)
               : "l"(at)
               : "memory");
  return value;
}

__device__ __forceinline__ uint64_t NowNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(ns));
  return ns;
}

// Thread t < world: signal peer t that this block's slice of call `epoch`
// is written, then wait for peer t's signal (counts wrap: compare the
// difference). A peer may already be one call ahead; never two.
__device__ void Barrier(const OneShotArgs& a, uint32_t epoch) {
  const int peer = threadIdx.x, b = blockIdx.x;
  if (peer < a.world) {
    StoreRelease(a.flags[peer] + a.rank * kOneShotBlocks + b, epoch);
    const uint32_t* mine = a.flags[a.rank] + peer * kOneShotBlocks + b;
    const uint64_t start = NowNs();
    while (static_cast<int32_t>(LoadAcquire(mine) - epoch) < 0) {
      if (NowNs() - start > kOneShotTimeoutNs) {
        atomicExch(a.error, 1u);
        break;
      }
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kOneShotThreads)
    OneShotAllReduceKernel(OneShotArgs a, const float* in, float* out,
                           int64_t n) {
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = a.epochs[blockIdx.x] + 1;
  __syncthreads();
  const int64_t per = (n + kOneShotBlocks - 1) / kOneShotBlocks;
  const int64_t lo = blockIdx.x * per;
  const int64_t hi = lo + per < n ? lo + per : n;
  const int64_t parity = (epoch & 1) * a.max_floats;
  float* mine = a.buffers[a.rank] + parity;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) mine[i] = in[i];
  __syncthreads();
  Barrier(a, epoch);
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    out[i] = OneShotRankOrderSum(a.buffers, a.world, parity + i);
  }
  if (threadIdx.x == 0) a.epochs[blockIdx.x] = epoch;
}

}  // namespace

int64_t OneShotFlagsOffset(int64_t max_floats) {
  return 2 * max_floats * static_cast<int64_t>(sizeof(float));
}

int64_t OneShotPeerBytes(int64_t max_floats) {
  return OneShotFlagsOffset(max_floats) +
         int64_t{kOneShotMaxRanks} * kOneShotBlocks * sizeof(uint32_t);
}

cudaError_t LaunchOneShotAllReduce(const OneShotArgs& args, const float* in,
                                   float* out, int64_t n, cudaStream_t stream) {
  if (n > args.max_floats || args.world > kOneShotMaxRanks || n < 0) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  OneShotAllReduceKernel<<<kOneShotBlocks, kOneShotThreads, 0, stream>>>(
      args, in, out, n);
  return cudaGetLastError();
}

}  // namespace moetune::gpu
