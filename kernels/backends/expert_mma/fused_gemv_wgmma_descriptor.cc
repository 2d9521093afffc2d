// fused_gemv_wgmma's descriptor (kernels/backends/descriptor.h); its launcher
// is kernels/cuda/experts/expert_mma/fused_gemv_wgmma.cu.
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::fused_gemv_wgmma {
namespace {

constexpr Tile kTiles[] = {MOETUNE_FUSED_GEMV_TILES(MOETUNE_TILE_ELEMENT)};

// The router splits the slots into wide and narrow above 16 tokens
// (kernels/cuda/moe/layer.cuh's kWideSplitBatch; a layer.cuh constant cannot be
// read here, plain C++); at 16 and fewer every slot is narrow and the
// backend would be fused_gemv under another name.
constexpr int kMinTokens = 17;

// fused_gemv's rules at the tile (the narrow kernel) and grouped_wgmma's at
// its one wide tile.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  if (shape.batch < kMinTokens) {
    return "fused_gemv_wgmma: needs at least " + std::to_string(kMinTokens) +
           " tokens (got " + std::to_string(shape.batch) +
           "): below, every expert's tokens fit one n-tile; use fused_gemv";
  }
  std::string why = TiledLayoutRule("fused_gemv_wgmma tile " + TileText(tile),
                                    shape, tile.block_n);
  if (!why.empty()) return why;
  const Tile wide{kWideWgmmaBlockN, kWideWgmmaBlockK};
  const std::string who =
      "fused_gemv_wgmma's wide kernel (grouped_wgmma " + TileText(wide) + ")";
  why = WholeKStepsRule(who, shape, wide);
  return why.empty() ? TiledLayoutRule(who, shape, wide.block_n) : why;
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "fused_gemv_wgmma",
      .placement = Placement::kGpu,
      .description =
          "serving batches: fused_gemv's one-n-tile kernel for the experts of "
          "<= 8 tokens, grouped_wgmma's for the wider ones (shared expert "
          "included); the tile is the narrow kernel's",
      .tiles = kTiles,
      .graph_capturable = true,
      .times_decode_step = true,
      .gpu = {.min_sm = 90,
              .arch_specific = true,
              .feature = "wgmma, for its wide part"},
      .error_bound = 2e-2,
      .shape_rules = &Rules,
      // Its tile is its narrow kernel's, fused_gemv's own, so fused_gemv's
      // measurements pick it (on whole experts it too runs 16x512 faster
      // than 32x256 at every batch but 512 uniform).
      .measured_best = fused_gemv::Descriptor().measured_best,
  };
  return descriptor;
}

}  // namespace moetune::backends::fused_gemv_wgmma
