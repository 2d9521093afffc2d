// The one-shot kernel of the all-reduce, reduce-scatter and all-gather
// (oneshot.cuh says how it synchronises; oneshot_order.h, in what order it
// sums).
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

// Block b takes elements [lo, hi) of every part (a part: the message, or
// under kReduceScatter / kAllGather one rank's n words), so that after the
// barrier of block b it reads only what block b of every peer wrote.
__global__ void __launch_bounds__(kOneShotThreads)
    OneShotKernel(OneShotArgs a, const uint32_t* in, uint32_t* out, int64_t n,
                  OneShotOp op) {
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = a.epochs[blockIdx.x] + 1;
  __syncthreads();
  const int64_t per = (n + kOneShotBlocks - 1) / kOneShotBlocks;
  const int64_t lo = blockIdx.x * per;
  const int64_t hi = lo + per < n ? lo + per : n;
  const int64_t parity = (epoch & 1) * a.max_floats;
  uint32_t* mine = reinterpret_cast<uint32_t*>(a.buffers[a.rank] + parity);
  // Parts copied in: all W under kReduceScatter; the own one under
  // kAllGather (at its place); the message under kAllReduce.
  const int first = op == OneShotOp::kAllGather ? a.rank : 0;
  const int last = op == OneShotOp::kReduceScatter ? a.world - 1 : first;
  for (int part = first; part <= last; ++part) {
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      mine[part * n + i] = in[part * n + i];
    }
  }
  __syncthreads();
  Barrier(a, epoch);
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    if (op == OneShotOp::kAllGather) {
      for (int p = 0; p < a.world; ++p) {
        out[p * n + i] =
            reinterpret_cast<const uint32_t*>(a.buffers[p] + parity)[p * n + i];
      }
      continue;
    }
    const int64_t at = op == OneShotOp::kReduceScatter ? a.rank * n + i : i;
    out[i] =
        __float_as_uint(OneShotRankOrderSum(a.buffers, a.world, parity + at));
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

cudaError_t LoadOneShotKernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, OneShotKernel);
}

cudaError_t LaunchOneShot(const OneShotArgs& args, OneShotOp op, const void* in,
                          void* out, int64_t n, cudaStream_t stream) {
  const int64_t parts = op == OneShotOp::kAllReduce ? 1 : args.world;
  if (n < 0 || n * parts > args.max_floats || args.world > kOneShotMaxRanks) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  OneShotKernel<<<kOneShotBlocks, kOneShotThreads, 0, stream>>>(
      args, static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), n,
      op);
  return cudaGetLastError();
}

}  // namespace moetune::gpu
