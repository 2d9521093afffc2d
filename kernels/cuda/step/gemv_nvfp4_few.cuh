// The NVFP4 GEMV of one or two sequences (gemv.cuh Nvfp4Gemv), as the BF16
// one of one or two (gemv.cu GemvBf16FewKernel): small enough for a GEMV of
// the step's size to run in one wave. The E2M1 codes are decoded by integer
// arithmetic to FP16 pairs, the block scales by the hardware's E4M3
// conversion, the products summed in float. The general CUDA-core kernel
// (E2M1 and E4M3 tables in shared memory, 124 registers) runs the dense
// MLP's gate_up at TP8 in 48.9 us at batch 1 for 10.7 MB; this one in 19.3
// (ncu; kernels/cuda/step/PERF.md).
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// g with batch 1 or 2, k a multiple of 32, x rows 16-byte aligned.
GpuStatus LaunchGemvNvfp4Few(const Nvfp4Gemv& g, cudaStream_t stream,
                             const LaunchPolicy& policy);

}  // namespace moetune::gpu
