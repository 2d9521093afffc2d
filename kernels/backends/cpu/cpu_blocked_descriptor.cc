// cpu_blocked's descriptor (kernels/backends/descriptor.h); its launcher is
// cpu_blocked.cc beside it.
#include "kernels/backends/cpu/tiles.h"
#include "kernels/backends/registry.h"

namespace moetune::backends::cpu_blocked {
namespace {

#define MOETUNE_CPU_TILE(n, k) Tile{n, k},
constexpr Tile kTiles[] = {MOETUNE_CPU_BLOCKED_TILES(MOETUNE_CPU_TILE)};
#undef MOETUNE_CPU_TILE

// It walks K in whole tiles of whole NVFP4 blocks (16 elements) and rows in
// whole tiles.
std::string Rules(const LayerShape& shape, const Tile& tile) {
  const std::string who = "cpu_blocked tile " + TileText(tile);
  const std::string dims = "hidden (" + std::to_string(shape.hidden) +
                           ") and moe_intermediate/tp (" +
                           std::to_string(shape.inter_slice) + ")";
  if (tile.block_k % 16 != 0) return who + ": needs block_k a multiple of 16";
  if (shape.hidden % tile.block_k != 0 ||
      shape.inter_slice % tile.block_k != 0) {
    return who + ": needs block_k to divide " + dims;
  }
  if (shape.hidden % tile.block_n != 0 ||
      shape.inter_slice % tile.block_n != 0) {
    return who + ": needs block_n to divide " + dims;
  }
  return "";
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "cpu_blocked",
      .placement = Placement::kCpu,
      .description =
          "CPU MoE with NVFP4 decoded per tile and reused across the batch",
      .tiles = kTiles,
      .times_decode_step = true,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::cpu_blocked
