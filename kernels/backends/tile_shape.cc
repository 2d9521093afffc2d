#include "kernels/backends/tile_shape.h"

namespace moetune::backends {

Tile TileOf(const v1::TileShape& shape) {
  return {shape.block_n(), shape.block_k(), shape.stages()};
}

v1::TileShape TileShapeOf(const Tile& tile) {
  v1::TileShape shape;
  shape.set_block_n(tile.block_n);
  shape.set_block_k(tile.block_k);
  shape.set_stages(tile.stages);
  return shape;
}

}  // namespace moetune::backends
