// Launcher: the GPU half of a backend (CUTLASS style: WorkspaceBytes / Launch
// over plain structs; CanImplement is the descriptor's, checked by the
// runtime before either is called). Launch enqueues the whole layer (router,
// routing, experts, shared expert, combine) on a stream. Each GPU backend's
// folder defines name::Launcher() (kernels/backends/backend_list.h);
// FindLauncher looks one up by name. Stateless; thread-safe to look up.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string_view>

#include "kernels/backends/descriptor.h"
#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

struct Launcher {
  const backends::BackendDescriptor* descriptor = nullptr;
  size_t (*workspace_bytes)(const LayerArgs& args) = nullptr;
  GpuStatus (*launch)(const LayerArgs& args, void* workspace,
                      cudaStream_t stream) = nullptr;
  // The bit layout its expert kernels read the weights in.
  WeightLayout weight_layout = WeightLayout::kFp16Bits;
};

// nullptr when `name` is not a GPU backend with a launcher in this build.
const Launcher* FindLauncher(std::string_view name);

// Shared pieces of the backends (layer_common.cu).
// dst[p][:] = src[tok_list[p]][:] for every used position p (rows of
// `hidden` 2-byte elements).
GpuStatus LaunchGatherRows(const LayerArgs& args, const uint16_t* src,
                           uint16_t* dst, cudaStream_t stream);
// y[t][r] = sum over token t's positions p (routed, then shared) of
// yp[p][r] (times tok_w[p] when apply_weight): a fixed order, no atomics.
GpuStatus LaunchCombine(const LayerArgs& args, const float* yp,
                        bool apply_weight, cudaStream_t stream);
// WorkspaceBytes of a backend that needs none.
size_t NoWorkspace(const LayerArgs& args);

}  // namespace moetune::gpu

// name::Launcher() for every GPU entry of kernels/backends/backend_list.h.
#define MOETUNE_DECLARE_LAUNCHER(name)        \
  namespace moetune::backends::name {         \
  const ::moetune::gpu::Launcher& Launcher(); \
  }
