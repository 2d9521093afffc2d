// fused_gemv's narrow kernels alone, for fused_gemv_wgmma: after the router,
// above kWideSplitBatch tokens, the slots of at most kWideTokens tokens
// (those after the router's meta[kMetaWide] wide ones; layer.cuh) streamed
// by the stream-K kernel of one 8-token n-tile, gate_up then down, down
// adding into y by atomics. Launch-side; included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

// At the run's tile (block_n x block_k, one of fused_gemv's); fails on
// another.
GpuStatus LaunchFusedGemvNarrow(const LayerArgs& args, cudaStream_t stream);

}  // namespace moetune::gpu
