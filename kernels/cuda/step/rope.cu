// LaunchRope and LaunchRopeRows (step_ops.cuh): RoPE of query and key rows.
#include "kernels/cuda/step/ops_parts.cuh"

namespace moetune::gpu {
namespace {

// Rows of a, then rows of b: a thread a pair.
__global__ void RopeKernel(RopeRows a, RopeRows b, RopeTable rope) {
  EnterAfterPriorKernels();
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t in_a = static_cast<int64_t>(a.rows) * rope.pairs;
  const RopeRows& r = i < in_a ? a : b;
  if (i >= in_a) i -= in_a;
  if (i >= static_cast<int64_t>(r.rows) * rope.pairs) return;
  const int64_t row = i / rope.pairs;
  RotatePair(r.x + row * r.stride + r.offset, static_cast<int>(i % rope.pairs),
             rope);
}

}  // namespace

GpuStatus LaunchRope(float* x, int rows, int stride, int offset,
                     const RopeTable& rope, cudaStream_t stream,
                     const LaunchPolicy& policy) {
  return LaunchRopeRows(RopeRows{x, rows, stride, offset}, RopeRows{}, rope,
                        stream, policy);
}

GpuStatus LaunchRopeRows(const RopeRows& a, const RopeRows& b,
                         const RopeTable& rope, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  const int64_t n = static_cast<int64_t>(a.rows + b.rows) * rope.pairs;
  if (n == 0) return OkStatus();
  return LaunchOverlapped(RopeKernel, Blocks(n), kThreads, 0, stream, policy, a,
                          b, rope);
}

}  // namespace moetune::gpu
