// LaunchArgMax (step_ops.cuh): the best token of each sequence's logits.
#include "kernels/cuda/step/ops_parts.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu {
namespace {

constexpr int kArgMaxThreads = 1024, kArgMaxLoads = 8;

// One block a row: (value, index) maxima, the lower index on ties.
__global__ void ArgMaxKernel(const float* logits, int width, int first_token,
                             int* next) {
  EnterAfterPriorKernels();
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * width;
  float v = -INFINITY;
  int idx = width;
  // kArgMaxLoads loads in flight a thread (a loop of one load at a time
  // waited on memory for each: 26 us over a 19360-token slice).
  for (int base = threadIdx.x; base < width;
       base += kArgMaxLoads * blockDim.x) {
    float loaded[kArgMaxLoads];
#pragma unroll
    for (int u = 0; u < kArgMaxLoads; ++u) {
      const int i = base + u * blockDim.x;
      loaded[u] = i < width ? row[i] : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kArgMaxLoads; ++u) {
      if (loaded[u] > v) {  // ascending i per thread: the first maximum stays
        v = loaded[u];
        idx = base + u * blockDim.x;
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) {
      v = ov;
      idx = oi;
    }
  }
  if ((threadIdx.x & 31) == 0) {
    best_v[threadIdx.x >> 5] = v;
    best_i[threadIdx.x >> 5] = idx;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < blockDim.x / 32; ++w) {
    if (best_v[w] > v || (best_v[w] == v && best_i[w] < idx)) {
      v = best_v[w];
      idx = best_i[w];
    }
  }
  next[blockIdx.x] = first_token + idx;
}

}  // namespace

GpuStatus LaunchArgMax(const float* logits, int width, int batch,
                       int first_token, int* next, cudaStream_t stream,
                       const LaunchPolicy& policy) {
  return LaunchOverlapped(ArgMaxKernel, batch, kArgMaxThreads, 0, stream,
                          policy, logits, width, first_token, next);
}

}  // namespace moetune::gpu
