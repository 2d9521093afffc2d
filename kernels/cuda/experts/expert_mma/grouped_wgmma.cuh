// grouped_wgmma's expert kernels over the router's wide slots only, for
// fused_gemv_wgmma: the slots of more than kWideTokens tokens (the shared
// expert first; layer.cuh), whose tokens fill its 32-token tiles, while
// fused_gemv's one-n-tile kernel streams the rest. Launch-side; included by
// .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

// The workspace LaunchWideWgmma needs: the wide slots' token tiles of x and
// of h, and the tile tables (no per-position rows: down adds into y).
size_t WideWgmmaWorkspaceBytes(const LayerArgs& args);

// After the router: the wide slots' token tiles, then grouped_wgmma's
// gate_up and down at tile kWideWgmmaBlockN x kWideWgmmaBlockK (tiles.h),
// down's rows times their routing weight added into y by atomics (the
// router zeroed y). Refuses more slots than its shared-memory tables hold.
GpuStatus LaunchWideWgmma(const LayerArgs& args, void* workspace,
                          cudaStream_t stream);

}  // namespace moetune::gpu
