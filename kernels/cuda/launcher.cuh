// The GPU MoE backends behind one interface (CUTLASS-style): CanImplement /
// WorkspaceBytes / Launch over plain structs. Launch enqueues the whole
// layer (router, routing, experts, shared expert, combine) on a stream.
// Tile shapes are template parameters instantiated only from the X-macro
// lists of kernels/backend_catalog.h. Stateless; thread-safe to look up.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/layer.cuh"

namespace moetune::gpu {

struct BackendOps {
  const char* name;
  bool has_tiles;
  // false: Launch synchronises with the host mid-layer (no graph capture).
  bool graph_capturable;
  GpuStatus (*can_implement)(const LayerArgs& args);
  size_t (*workspace_bytes)(const LayerArgs& args);
  GpuStatus (*launch)(const LayerArgs& args, void* workspace,
                      cudaStream_t stream);
  // The bit layout its expert kernels read the weights in.
  WeightLayout weight_layout = WeightLayout::kFp16Bits;
};

const BackendOps& FusedGemvOps();
const BackendOps& FusedGemvFp8Ops();
const BackendOps& GroupedMmaOps();
const BackendOps& DequantCublasOps();
// nullptr when `name` is not a GPU MoE backend built into this library.
const BackendOps* FindBackendOps(const std::string& name);

// Shared pieces of the backends (backend_common.cu).
// dst[p][:] = src[tok_list[p]][:] for every used position p (rows of
// `hidden` 2-byte elements).
GpuStatus LaunchGatherRows(const LayerArgs& args, const uint16_t* src,
                           uint16_t* dst, cudaStream_t stream);
// y[t][r] = sum over token t's positions p (routed, then shared) of
// yp[p][r] (times tok_w[p] when apply_weight): a fixed order, no atomics.
GpuStatus LaunchCombine(const LayerArgs& args, const float* yp,
                        bool apply_weight, cudaStream_t stream);
// Checks shared by every tensor-core backend: K and the row tiles.
GpuStatus CheckTiledDims(const LayerArgs& args, int rows_per_unit,
                         const char* backend);
// "16x256, 16x512" for error messages.
std::string TileList(const std::string& backend);
// kCannotImplement naming the backend's tiles unless (block_n, block_k) is
// one of them (kernels/backend_catalog.h).
GpuStatus CheckTile(const LayerArgs& args, const char* backend);

}  // namespace moetune::gpu
