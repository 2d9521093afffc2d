// LaunchEmbed (step_ops.cuh): the embedding rows of the step's tokens.
#include "kernels/cuda/step/ops_parts.cuh"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

__global__ void EmbedKernel(const int* tokens, int hidden, uint64_t seed,
                            float scale, float* h) {
  EnterAfterPriorKernels();
  const int b = blockIdx.y;
  const uint64_t row = static_cast<uint64_t>(tokens[b]) * hidden;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden;
       i += gridDim.x * blockDim.x) {
    h[static_cast<int64_t>(b) * hidden + i] =
        weights::Bf16Weight(seed, 0, weights::kEmbedding, row + i, scale);
  }
}

}  // namespace

GpuStatus LaunchEmbed(const int* tokens, int batch, int hidden, uint64_t seed,
                      float scale, float* h, cudaStream_t stream,
                      const LaunchPolicy& policy) {
  return LaunchOverlapped(EmbedKernel, dim3(Blocks(hidden), batch), kThreads, 0,
                          stream, policy, tokens, hidden, seed, scale, h);
}

}  // namespace moetune::gpu
