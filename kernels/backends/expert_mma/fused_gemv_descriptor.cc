// fused_gemv's descriptor (kernels/backends/descriptor.h); its launcher is
// kernels/cuda/experts/expert_mma/fused_gemv.cu.
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

// Measured on GLM-5's layer (hidden 6144) on the H200: on a TP8 slice
// (inter 256) 32x256 was the fastest in the decode step at every batch
// (TP8 batch 1 / 8 / 32: 8.53 / 15.76 / 33.17 ms against
// 16x256's 8.61 / 16.31 / 34.62 and 16x512's 8.63 / 16.30 / 33.92); on
// whole experts 16x512 (tests/data/recorded_h200_sweep.json at 1 / 8 / 32
// tokens: 88.9 / 339.6 / 1102.6 us against 32x256's 90.8 / 389.6 / 1429.6
// and 16x256's 95.2 / 439.2 / 1477.1; EP8's step agrees at 1 and 32).
// 16x256, the list's first, was never the fastest. Other shapes keep the
// list's order.
constexpr int kMeasuredHidden = 6144;
Tile MeasuredBest(const LayerShape& shape) {
  if (shape.hidden != kMeasuredHidden) return Tile{};
  return shape.inter_slice <= 256 ? Tile{32, 256} : Tile{16, 512};
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
      .trusted_path_order = 1,
      .shape_rules = &Rules,
      .measured_best = &MeasuredBest,
  };
  return descriptor;
}

}  // namespace moetune::backends::fused_gemv
