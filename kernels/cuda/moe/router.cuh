// The fast MoE router shared by every GPU backend: one launch computes the
// router logits (BF16 weights, float accumulation; on tensor cores from 8
// tokens), and its last block to finish picks each token's top-k experts and
// builds the slot lists the expert kernels read (RunBuffers: slots, positions,
// token lists, tiles). It also writes the fp16 copy of the input and zeroes the
// output. Ties go to the lower expert index, as in the reference. Slot 0 is the
// shared expert (positions [0, batch)) when this rank has it. The kernel lets
// dependent launches start at once (griddepcontrol). Launch-only; not
// thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

inline constexpr int kRouterMaxExperts = 256;
inline constexpr int kRouterMaxTopK = 32;
// Each of a router block's 256 threads holds its 4 x 8 of the expert's
// weights in registers (router_parts.cuh, kMaxPerThread).
inline constexpr int kRouterMaxHidden = 8192;

// Enqueues the router on `stream`. Geometry must satisfy experts <=
// kRouterMaxExperts, top_k <= kRouterMaxTopK and hidden <= kRouterMaxHidden
// (checked by the runner).
GpuStatus LaunchRouter(const LayerArgs& args, cudaStream_t stream);

}  // namespace moetune::gpu
