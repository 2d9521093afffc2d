// The step's small ops' shared parts (step_ops.cuh declares the ops; one
// .cu file an op): block sizes and the RoPE rotation of a pair. Included only
// by those files; its functions keep internal linkage (an unnamed namespace)
// in each. Launch-only; not thread-safe.
#pragma once

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/step_ops.cuh"

namespace moetune::gpu {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>((n + threads - 1) / threads);
}

__device__ void RotatePair(float* p, int i, const RopeTable& rope) {
  const double even = p[2 * i], odd = p[2 * i + 1];
  const double c = rope.cos[i], s = rope.sin[i];
  p[2 * i] = static_cast<float>(even * c - odd * s);
  p[2 * i + 1] = static_cast<float>(odd * c + even * s);
}

}  // namespace
}  // namespace moetune::gpu
