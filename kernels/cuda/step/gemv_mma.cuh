// The BF16 GEMV on tensor cores, for batches of several sequences: at a
// batch of 8-32 the CUDA-core GEMV (gemv.cu) spends its time re-reading the
// sequences' inputs from L1 for every weight (kernels/cuda/step/PERF.md), so
// the products go to mma.sync instead: a warp multiplies 16 weight rows by
// up to 32 sequences a pass. The inputs are split into three BF16 parts
// (x = hi + mid + lo to 2^-27 of x), so the result keeps float inputs'
// accuracy.
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// The batch from which LaunchGemvBf16 uses the tensor-core GEMV (where it
// fits). The TP8 step at context 4096: batch 2 13.02 ms on CUDA cores
// against 13.58 on tensor cores; batch 3 17.15 against 15.02.
inline constexpr int kGemvMmaMinBatch = 3;

// Whether g's shape suits the tensor-core GEMV: k a multiple of 32, every
// 16-row tile inside one input group, inputs 16-byte aligned.
bool GemvBf16MmaFits(const Bf16Gemv& g);

// g with rows_per_x set (LaunchGemvBf16 does), GemvBf16MmaFits(g).
GpuStatus LaunchGemvBf16Mma(const Bf16Gemv& g, cudaStream_t stream,
                            const LaunchPolicy& policy);

}  // namespace moetune::gpu
