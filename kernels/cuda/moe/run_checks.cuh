// What RunMoeLayer checks before it touches the device: the problem and the
// options (kBadProblem, naming the field), the backend (kUnavailable when
// this machine does not have it) and whether it can run this shape
// (kCannotImplement: its descriptor's rules, the shared router's limits,
// graph capture). Pure functions of their arguments, except the backend's
// probe; thread-safe.
#pragma once

#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {

GpuStatus ValidateProblem(const MoeProblem& problem,
                          const MoeRunOptions& options);
// The launcher of options.backend, available on options.device.
GpuStatus ResolveLauncher(const MoeRunOptions& options,
                          const Launcher** launcher);
// The tile the run uses on layer geometry g: options', or for Tile{} the
// backend's tile for g's shape (its default, or
// the first that runs it: BackendDescriptor::TileFor).
backends::Tile RunTile(const MoeRunOptions& options,
                       const backends::BackendDescriptor& backend,
                       const Geometry& g);
GpuStatus CheckCanImplement(const Geometry& g, const MoeRunOptions& options,
                            const backends::BackendDescriptor& backend);

}  // namespace moetune::gpu
