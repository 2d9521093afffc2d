// The CPU backends' MoE layers by name: what the worker times for the CPU
// entries of kernels/backends/backend_list.h. Each CPU backend's folder
// defines MakeMoe in its own namespace. Thread-safe lookups.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/backends/backend_list.h"
#include "kernels/backends/descriptor.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/step_spec.h"

namespace moetune::backends {

// A CPU backend's MoE layer for `step` with `tile` (Tile{} without tiles):
// INVALID_ARGUMENT for a bad step, FAILED_PRECONDITION ("kernel cannot do
// this shape") when the tile cannot run it.
using MoeFactory = absl::StatusOr<ref::MoeFn> (*)(const ref::StepSpec& step,
                                                  const Tile& tile);

// nullptr when `name` is not a CPU backend.
MoeFactory FindCpuMoe(std::string_view name);

// name::MakeMoe, a MoeFactory, for every CPU entry of the list.
#define MOETUNE_DECLARE_MAKE_MOE(name)                          \
  namespace name {                                              \
  absl::StatusOr<ref::MoeFn> MakeMoe(const ref::StepSpec& step, \
                                     const Tile& tile);         \
  }
#define MOETUNE_NOT_CPU(name)
MOETUNE_BACKENDS(MOETUNE_DECLARE_MAKE_MOE, MOETUNE_NOT_CPU, MOETUNE_NOT_CPU)
#undef MOETUNE_NOT_CPU
#undef MOETUNE_DECLARE_MAKE_MOE

}  // namespace moetune::backends
