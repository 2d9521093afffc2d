// The NVFP4 GEMV on tensor cores, for batches of several sequences: the
// CUDA-core NVFP4 GEMV (gemv.cu) decodes every weight again for each 8
// sequences (640 us a layer for the dense MLP at batch 32). Here a
// warp decodes 16 rows' weights once to BF16 -- exact: an E2M1 value times
// its E4M3 block scale has at most 6 significant bits -- and multiplies them
// with up to 32 sequences by mma.sync, the float inputs in three BF16 parts
// (mma_parts.cuh), split in each warp or, with the scratch, once by a pass
// before it (kNvfp4SplitOnceFromBatch: the all-NVFP4 step -25 % at 16-32
// sequences); the tensor scale is applied to the sums.
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// Whether g's shape suits it: k a multiple of 128 (a lane decodes 32
// weights at a time), every 16-row tile inside one input group, inputs
// 16-byte aligned.
bool GemvNvfp4MmaFits(const Nvfp4Gemv& g);

// g with rows_per_x set and GemvNvfp4MmaFits(g).
GpuStatus LaunchGemvNvfp4Mma(const Nvfp4Gemv& g, cudaStream_t stream,
                             const LaunchPolicy& policy);

// The batch from which the kernel reads the inputs split once
// (Nvfp4Gemv::x_parts) where it is given the scratch: each of the batch's
// 8-sequence tiles' floats split into three BF16 parts by one pass, laid
// out as the warps' mma B fragments, instead of a float4 load and two
// three-part splits a lane for every 4 K of every 16-row tile.
inline constexpr int kNvfp4SplitOnceFromBatch = 3;

// uint2 elements of the scratch for `batch` sequences of `inputs` floats
// each (input groups x k): 8-sequence tiles as the kernel's passes cover
// them, x 3 parts x a BF16 pair a 2 K.
size_t Nvfp4GemvInputParts(int batch, int64_t inputs);

}  // namespace moetune::gpu
