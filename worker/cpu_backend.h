// The CPU backends: `cpu_reference` (the oracle itself, timed) and
// `cpu_blocked` (NVFP4 decoded per tile and reused across the batch). They
// run on CPU workers only, so that a GPU worker's timings never include a
// CPU busy with a neighbour's trial.
#pragma once

#include <memory>

#include "common/clock.h"
#include "worker/backend.h"

namespace moetune::worker {

std::unique_ptr<Backend> MakeCpuReferenceBackend(const Clock* clock);
std::unique_ptr<Backend> MakeCpuBlockedBackend(const Clock* clock);

// The layer a MOE_LAYER trial times: the first MoE layer of the preset.
int FirstMoeLayer(const ref::StepSpec& step);

}  // namespace moetune::worker
