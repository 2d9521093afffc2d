#include "worker/backend.h"

#include "kernels/backends/tile_shape.h"

namespace moetune::worker {

void AddTiles(const backends::BackendDescriptor& descriptor,
              v1::BackendProbe* probe) {
  for (const backends::Tile& tile : descriptor.tiles) {
    *probe->add_tiles() = backends::TileShapeOf(tile);
  }
}

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  backends_.push_back(std::move(backend));
}

Backend* BackendRegistry::Find(const std::string& name) const {
  for (const auto& backend : backends_) {
    if (backend->descriptor().name == name) return backend.get();
  }
  return nullptr;
}

}  // namespace moetune::worker
