// grouped_mma's descriptor (kernels/backends/descriptor.h); its launcher is
// kernels/cuda/experts/expert_mma/grouped_mma.cu.
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::grouped_mma {
namespace {

constexpr Tile kTiles[] = {MOETUNE_GROUPED_MMA_TILES(MOETUNE_TILE_ELEMENT)};

// One block a (64-token tile, block_n rows); K in the layout's chunks.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  return TiledLayoutRule("grouped_mma tile " + TileText(tile), shape,
                         tile.block_n);
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "grouped_mma",
      .placement = Placement::kGpu,
      .description = "token-permuted grouped GEMM on tensor cores",
      .tiles = kTiles,
      .graph_capturable = true,
      .times_decode_step = true,
      .gpu = {.min_sm = 90, .feature = "Hopper"},
      .error_bound = 2e-2,
      .trusted_path_order = 2,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::grouped_mma
