#include "worker/backend.h"

namespace moetune::worker {

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  backends_.push_back(std::move(backend));
}

Backend* BackendRegistry::Find(const std::string& name) const {
  for (const auto& backend : backends_) {
    if (backend->info().name == name) return backend.get();
  }
  return nullptr;
}

}  // namespace moetune::worker
