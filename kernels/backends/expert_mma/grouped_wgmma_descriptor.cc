// grouped_wgmma's descriptor (kernels/backends/descriptor.h); its launcher is
// kernels/cuda/experts/expert_mma/grouped_wgmma.cu.
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::grouped_wgmma {
namespace {

constexpr Tile kTiles[] = {
    MOETUNE_GROUPED_WGMMA_TILES(MOETUNE_STAGED_TILE_ELEMENT)};

// Units of block_n rows (64 a wgmma), each K step a whole block_k.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  const std::string who = "grouped_wgmma tile " + TileText(tile);
  std::string why = WholeKStepsRule(who, shape, tile);
  return why.empty() ? TiledLayoutRule(who, shape, tile.block_n) : why;
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "grouped_wgmma",
      .placement = Placement::kGpu,
      .description =
          "serving batches: tokens tiled by expert, NVFP4 streamed by TMA, "
          "decoded to fp16 for wgmma",
      .tiles = kTiles,
      .graph_capturable = true,
      .times_decode_step = true,
      .gpu = {.min_sm = 90, .arch_specific = true, .feature = "wgmma"},
      .error_bound = 2e-2,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::grouped_wgmma
