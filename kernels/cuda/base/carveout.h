// How much of an SM's 256 KB of L1 and shared memory a launch asks to be
// shared memory (its carveout). An SM keeps the split its last kernel took
// while the next kernel's blocks still fit, so a kernel left to the
// driver's choice, which takes the split of the most blocks it could hold,
// leaves the kernels after it a small L1: at 4 sequences the split
// attention at three blocks an SM makes the step 12 % slower, its GEMVs'
// reads from L1 thrashing (kernels/cuda/step/PERF.md). Host-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moetune::gpu {

// The carveout (percent of the SM's largest shared memory) that holds as
// many blocks of `kernel` (`threads` a block, `smem` dynamic bytes) as a
// grid of `blocks` needs an SM on the current device, and no more: at most
// the kernel's occupancy, at least one. -1 where the runtime cannot say
// (the launch then leaves the split to the driver: it is a hint, not a
// condition of the launch). Remembered per (device, kernel, shape), so
// an eager step's launches ask the runtime once.
int FittedCarveout(const void* kernel, int64_t blocks, int threads,
                   size_t smem);

}  // namespace moetune::gpu
