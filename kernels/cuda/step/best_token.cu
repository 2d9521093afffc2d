// LaunchPostBest and LaunchPickBest (step_ops.cuh): the gang agrees on each
// sequence's token from every rank's best of its vocabulary slice.
#include "kernels/cuda/step/ops_parts.cuh"

namespace moetune::gpu {
namespace {

// One thread an entry of the [world][batch] table.
__global__ void PostBestKernel(const float* logits, int width, int first_token,
                               const int* next, int batch, int rank, int world,
                               float* best) {
  EnterAfterPriorKernels();
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= world * batch) return;
  const int r = e / batch, i = e % batch;
  float logit = 0.0f, token = 0.0f;
  if (r == rank) {
    logit = logits[static_cast<int64_t>(i) * width + next[i] - first_token];
    token = static_cast<float>(next[i]);  // exact: vocab < 2^24
  }
  best[2 * e] = logit;
  best[2 * e + 1] = token;
}

__global__ void PickBestKernel(const float* best, int batch, int world,
                               int* next) {
  EnterAfterPriorKernels();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch) return;
  float v = best[2 * i];
  int token = static_cast<int>(best[2 * i + 1]);
  for (int r = 1; r < world; ++r) {
    const float* e = best + 2 * (static_cast<int64_t>(r) * batch + i);
    const int t = static_cast<int>(e[1]);
    if (e[0] > v || (e[0] == v && t < token)) {
      v = e[0];
      token = t;
    }
  }
  next[i] = token;
}

}  // namespace

GpuStatus LaunchPostBest(const float* logits, int width, int first_token,
                         const int* next, int batch, int rank, int world,
                         float* best, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  const int entries = world * batch;
  return LaunchOverlapped(PostBestKernel, (entries + 255) / 256, 256, 0, stream,
                          policy, logits, width, first_token, next, batch, rank,
                          world, best);
}

GpuStatus LaunchPickBest(const float* best, int batch, int world, int* next,
                         cudaStream_t stream, const LaunchPolicy& policy) {
  return LaunchOverlapped(PickBestKernel, (batch + 255) / 256, 256, 0, stream,
                          policy, best, batch, world, next);
}

}  // namespace moetune::gpu
