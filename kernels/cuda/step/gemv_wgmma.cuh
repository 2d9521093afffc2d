// The BF16 GEMV for batches of 6-32 sequences on Hopper's wgmma,
// warp-specialized (kernels/cuda/step/PERF.md). A block multiplies 64,
// 128 or 192 weight rows by the sequences' inputs over its share of K: copier
// threads stream each 64-K stage's weights into a ring of shared-memory
// stages, and one TMA copy a stage brings the inputs' 64 floats of every
// sequence; splitter warps turn those into three BF16 parts (x = hi + mid +
// lo to 2^-27, as gemv_mma.cu) in wgmma's B layout; consumer warpgroups
// (64 rows each) only wait on the stage's mbarriers and multiply, a fresh
// accumulator every 32 K added in float, and give the slot back (with every
// thread of a block doing all three in turn, a block barrier a stage, the
// batch-32 GEMVs read at 16-18 % of DRAM bandwidth). K is split over
// a cluster of up to 8 blocks (as many as keep the grid within one wave and
// whose clusters fit at once) whose partial sums are added through
// distributed shared memory in rank order (the same bits every run).
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// The batches LaunchGemvBf16 gives the wgmma GEMV (where it fits).
// The TP8 step against gemv_mma.cu's: batch 3 +0.6 %, 4 +0.1 %, 6 -1.4 %,
// 8 -1.3 %.
inline constexpr int kGemvWgmmaMinBatch = 6;
inline constexpr int kGemvWgmmaMaxBatch = 32;

// Whether g (rows_per_x set) suits it: k a multiple of 64, every 64-row
// block inside one input group, inputs 16-byte aligned, a batch of at most
// kGemvWgmmaMaxBatch, and a device that has wgmma (sm_90).
bool GemvBf16WgmmaFits(const Bf16Gemv& g);

// g with rows_per_x set, GemvBf16WgmmaFits(g).
GpuStatus LaunchGemvBf16Wgmma(const Bf16Gemv& g, cudaStream_t stream,
                              const LaunchPolicy& policy);

// The consumer warpgroups a block of g's launch on this device (64 rows
// each: 1, 2 or 3), 0 where it cannot be planned.
int GemvBf16WgmmaWarpgroups(const Bf16Gemv& g);

}  // namespace moetune::gpu
