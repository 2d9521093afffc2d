// Every MoE backend the code knows, available on this machine or not, in the
// order of backend_list.h. Immutable after static initialisation;
// thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backends/backend_list.h"
#include "kernels/backends/descriptor.h"

namespace moetune::backends {

// name::Descriptor() of every backend of the list, declared here once.
#define MOETUNE_ANY_BACKEND(name) MOETUNE_DECLARE_DESCRIPTOR(name)
MOETUNE_BACKENDS(MOETUNE_ANY_BACKEND, MOETUNE_ANY_BACKEND, MOETUNE_ANY_BACKEND)
#undef MOETUNE_ANY_BACKEND

std::span<const BackendDescriptor* const> AllBackends();
// nullptr when `name` is not a known backend.
const BackendDescriptor* FindBackend(std::string_view name);
// "a, b, c": for error messages that list the allowed values.
std::string KnownBackendNames();
// The backends that may host the trusted GPU path, in their
// BackendDescriptor::trusted_path_order.
std::vector<const BackendDescriptor*> TrustedPathBackends();

}  // namespace moetune::backends
