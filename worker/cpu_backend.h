// The worker's side of a CPU backend (cpu_reference, cpu_blocked, ...): the
// backend's MoE layer (kernels/backends/cpu/cpu_registry.h) in the MOE_LAYER
// or the whole DECODE_STEP region, timed on the monotonic clock. CPU
// backends run on CPU workers only, so that a GPU worker's timings never
// include a CPU busy with a neighbour's trial.
#pragma once

#include <memory>

#include "common/clock.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "worker/backend.h"

namespace moetune::worker {

std::unique_ptr<Backend> MakeCpuBackend(
    const backends::BackendDescriptor& descriptor,
    backends::MoeFactory make_moe, const Clock* clock);

// The layer a MOE_LAYER trial times: the first MoE layer of the preset.
int FirstMoeLayer(const ref::StepSpec& step);

}  // namespace moetune::worker
