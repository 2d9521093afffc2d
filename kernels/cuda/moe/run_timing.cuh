// The timed part of a MoE layer run: the chain's layers launched back to back
// (or replayed as one CUDA graph), each iteration preceded by an L2 flush and
// bracketed by CUDA events; warm-up iterations are run and dropped. Not
// thread-safe (one run at a time, under the device lock).
#pragma once

#include <vector>

#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/cuda/moe/run_context.cuh"

namespace moetune::gpu {

// Appends options.iterations samples (us): each the time of the whole chain
// (one layer, or chain_layers back to back) / its layers.
GpuStatus TimeLayers(Context* ctx, const Launcher& launcher,
                     const std::vector<LayerArgs>& chain, void* workspace,
                     const MoeRunOptions& options,
                     std::vector<double>* samples);

}  // namespace moetune::gpu
