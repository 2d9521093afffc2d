#include "kernels/backends/tile_shape.h"

#include "gtest/gtest.h"
#include "kernels/backends/registry.h"

namespace moetune::backends {
namespace {

// Every listed tile, ring depth included, survives the API's TileShape and
// back; an unset TileShape is "no tile".
TEST(TileShapeTest, EveryListedTileRoundTrips) {
  for (const BackendDescriptor* backend : AllBackends()) {
    for (const Tile& tile : backend->tiles) {
      const v1::TileShape shape = TileShapeOf(tile);
      EXPECT_EQ(TileOf(shape), tile) << backend->name << " " << TileText(tile);
    }
  }
  const v1::TileShape staged = TileShapeOf({128, 256, 2});
  EXPECT_EQ(staged.stages(), 2);
  EXPECT_EQ(TileOf(v1::TileShape()), Tile{});
}

}  // namespace
}  // namespace moetune::backends
