// The shape rules of the tiled NVFP4 weight layout that every GPU backend
// reads (kernels/cuda/moe/tiled_nvfp4.h): K in 64-element chunks, rows in units
// of the tile's block_n. Shared by the GPU backends' descriptors. Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "kernels/backends/descriptor.h"

namespace moetune::backends {

// "" when hidden and inter_slice are multiples of 64 and the gate_up rows
// (2 x inter_slice) and down rows (hidden) are multiples of rows_per_unit;
// otherwise why, starting with `who` ("fused_gemv tile 16x256").
std::string TiledLayoutRule(std::string_view who, const LayerShape& shape,
                            int rows_per_unit);

// "" when block_k divides hidden and inter_slice (kernels that walk K in
// whole block_k steps); otherwise why, starting with `who`.
std::string WholeKStepsRule(std::string_view who, const LayerShape& shape,
                            const Tile& tile);

}  // namespace moetune::backends
