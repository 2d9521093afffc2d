#include "kernels/backends/registry.h"

#include <array>

namespace moetune::backends {
namespace {

#define MOETUNE_ENTRY(name) &name::Descriptor(),
const std::array kBackends = {
    MOETUNE_BACKENDS(MOETUNE_ENTRY, MOETUNE_ENTRY, MOETUNE_ENTRY)};
#undef MOETUNE_ENTRY

}  // namespace

std::span<const BackendDescriptor* const> AllBackends() { return kBackends; }

const BackendDescriptor* FindBackend(std::string_view name) {
  for (const BackendDescriptor* backend : kBackends) {
    if (backend->name == name) return backend;
  }
  return nullptr;
}

std::string KnownBackendNames() {
  std::string names;
  for (const BackendDescriptor* backend : kBackends) {
    if (!names.empty()) names += ", ";
    names += backend->name;
  }
  return names;
}

}  // namespace moetune::backends
