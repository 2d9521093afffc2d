// The trusted GPU path: the oracle at full dims (docs/design.md §3). Plain,
// obviously-right kernels: one thread per output element, every weight
// decoded straight from the hash functions (weights::*, nvfp4::*), float
// accumulation in index order, no tiling, no stored weights, no fast math.
// Slow (tens of ms at full dims) and only for checking. Not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"
#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {

// y [batch][hidden] = the rank's partial MoE output for x [batch][hidden]
// (device floats, the BF16-rounded input) and bias [experts] (device). Each
// token routed as the trusted path selects, or as backend_topk [batch][top_k]
// (device; the backend's selection, or null) does where that is a top-k of
// the trusted scores to within route::kTieTolerance (kernels/model/
// near_top_k.h): so a near-tie that the two break differently is no failure.
GpuStatus RunTrusted(const MoeProblem& problem, const Geometry& geo,
                     const float* x, const float* bias, const int* backend_topk,
                     float* y, cudaStream_t stream);

}  // namespace moetune::gpu
