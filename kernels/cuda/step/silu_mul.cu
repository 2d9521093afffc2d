// LaunchSiluMul (step_ops.cuh): SiLU(gate) * up of the dense MLP.
#include "kernels/cuda/step/ops_parts.cuh"

namespace moetune::gpu {
namespace {

__global__ void SiluMulKernel(const float* gu, int width, int batch,
                              float* act) {
  EnterAfterPriorKernels();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(width) * batch) return;
  const int64_t b = i / width, j = i % width;
  const float gate = gu[b * 2 * width + j], up = gu[b * 2 * width + width + j];
  act[i] = gate / (1.0f + expf(-gate)) * up;
}

}  // namespace

GpuStatus LaunchSiluMul(const float* gu, int width, int batch, float* act,
                        cudaStream_t stream, const LaunchPolicy& policy) {
  const int64_t n = static_cast<int64_t>(width) * batch;
  return LaunchOverlapped(SiluMulKernel, Blocks(n), kThreads, 0, stream, policy,
                          gu, width, batch, act);
}

}  // namespace moetune::gpu
