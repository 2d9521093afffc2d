#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends {

std::string TiledLayoutRule(std::string_view who, const LayerShape& shape,
                            int rows_per_unit) {
  const std::string dims =
      std::to_string(shape.hidden) + ", " + std::to_string(shape.inter_slice);
  if (shape.hidden % 64 != 0 || shape.inter_slice % 64 != 0) {
    return std::string(who) +
           ": needs hidden and moe_inter / tp to be multiples of 64 (got " +
           dims + ")";
  }
  if ((2 * shape.inter_slice) % rows_per_unit != 0 ||
      shape.hidden % rows_per_unit != 0) {
    return std::string(who) +
           ": needs 2 * moe_inter / tp and hidden to be multiples of " +
           std::to_string(rows_per_unit) + " rows (got " + dims + ")";
  }
  return "";
}

std::string WholeKStepsRule(std::string_view who, const LayerShape& shape,
                            const Tile& tile) {
  if (shape.hidden % tile.block_k == 0 &&
      shape.inter_slice % tile.block_k == 0) {
    return "";
  }
  return std::string(who) + ": block_k must divide hidden " +
         std::to_string(shape.hidden) + " and moe_inter / tp " +
         std::to_string(shape.inter_slice);
}

}  // namespace moetune::backends
