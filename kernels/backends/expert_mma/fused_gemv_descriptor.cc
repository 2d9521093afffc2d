// fused_gemv's descriptor (kernels/backends/descriptor.h); its launcher is
// fused_gemv.cu beside it.
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::fused_gemv {
namespace {

constexpr Tile kTiles[] = {MOETUNE_FUSED_GEMV_TILES(MOETUNE_TILE_ELEMENT)};

// Stream-K units of block_n rows over the tiled layout's 64-element chunks.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  return TiledLayoutRule("fused_gemv tile " + TileText(tile), shape,
                         tile.block_n);
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "fused_gemv",
      .placement = Placement::kGpu,
      .description = "expert-batched fused NVFP4 dequant-GEMV",
      .tiles = kTiles,
      .graph_capturable = true,
      .times_decode_step = true,
      .gpu = {.min_sm = 90, .feature = "Hopper"},
      .error_bound = 2e-2,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::fused_gemv
