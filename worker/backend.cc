#include "worker/backend.h"

namespace moetune::worker {

void AddTiles(const backends::BackendDescriptor& descriptor,
              v1::BackendProbe* probe) {
  for (const backends::Tile& tile : descriptor.tiles) {
    v1::TileShape* shape = probe->add_tiles();
    shape->set_block_n(tile.block_n);
    shape->set_block_k(tile.block_k);
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
