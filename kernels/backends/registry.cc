#include "kernels/backends/registry.h"

#include <algorithm>
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

std::vector<const BackendDescriptor*> TrustedPathBackends() {
  std::vector<const BackendDescriptor*> hosts;
  for (const BackendDescriptor* backend : kBackends) {
    if (backend->trusted_path_order > 0) hosts.push_back(backend);
  }
  std::stable_sort(hosts.begin(), hosts.end(),
                   [](const BackendDescriptor* a, const BackendDescriptor* b) {
                     return a->trusted_path_order < b->trusted_path_order;
                   });
  return hosts;
}

}  // namespace moetune::backends
