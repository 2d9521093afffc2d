// fused_gemv_fp8's descriptor (kernels/backends/descriptor.h); its launcher is
// kernels/cuda/experts/expert_mma/fused_gemv_fp8.cu.
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::fused_gemv_fp8 {
namespace {

constexpr Tile kTiles[] = {MOETUNE_FUSED_GEMV_FP8_TILES(MOETUNE_TILE_ELEMENT)};

// Units of block_n rows, and each unit's K step is a whole block_k.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  const std::string who = "fused_gemv_fp8 tile " + TileText(tile);
  std::string why = WholeKStepsRule(who, shape, tile);
  return why.empty() ? TiledLayoutRule(who, shape, tile.block_n) : why;
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "fused_gemv_fp8",
      .placement = Placement::kGpu,
      .description =
          "fused_gemv for one token on FP8 tensor cores: weights decoded to "
          "E4M3, activations split into hi + lo E4M3",
      .tiles = kTiles,
      .graph_capturable = true,
      .times_decode_step = true,
      .max_batch = 1,
      .max_batch_why =
          "its FP8 mma columns carry one token's four scale blocks; use "
          "fused_gemv",
      .gpu = {.min_sm = 90, .arch_specific = true, .feature = "FP8 wgmma"},
      .error_bound = 2e-2,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::fused_gemv_fp8
