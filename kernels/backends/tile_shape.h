// The one mapping between a backend's Tile (kernels/backends/descriptor.h)
// and the API's TileShape (proto/moetune.proto): the tuner, the worker and
// the CLI convert through it, so a field added to one reaches the other.
#pragma once

#include "kernels/backends/descriptor.h"
#include "proto/moetune.pb.h"

namespace moetune::backends {

Tile TileOf(const v1::TileShape& shape);
v1::TileShape TileShapeOf(const Tile& tile);

}  // namespace moetune::backends
