// The per-device state a MoE layer run reuses between trials of one process:
// the stream, the cuBLAS handle, the L2-flush buffer and the generated
// weights of the layer (and of a chain's further layers), regenerated only
// when their key changes. Not thread-safe: RunMoeLayer's device lock guards
// the one context.
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <vector>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/cuda/moe/weights.cuh"

namespace moetune::gpu {

struct Context {
  int device = -1;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  DeviceBuffer flush, sink;  // L2 flush: a read sweep over `flush`
  WeightSet weights;
  // The weights of the layers after problem.layer in a chain
  // (options.chain_layers), generated as the chain first needs them.
  std::vector<std::unique_ptr<WeightSet>> chain;
  ~Context();
};

// The context of `device` (made current), created on first use.
GpuStatus GetContext(int device, Context** out);
// Creates the context's cuBLAS handle once (backends that need one).
GpuStatus EnsureCublas(Context* ctx);
// Layer p.layer + i's weights in `launcher`'s layout: the context's cached
// set (i = 0) or the chain's, generated when the key differs.
GpuStatus EnsureWeights(Context* ctx, const MoeProblem& p, int device,
                        const Launcher& launcher, int i, const WeightSet** out);
// Frees chained layers past `chain_layers` and refuses, with the sizes, a
// chain whose layers not yet on the GPU do not fit (chain_budget.h).
GpuStatus FitChain(Context* ctx, int chain_layers, const Geometry& g);

}  // namespace moetune::gpu
