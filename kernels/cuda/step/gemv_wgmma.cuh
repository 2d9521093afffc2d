// The BF16 GEMV for batches of 6-32 sequences on Hopper's wgmma, its weights
// streamed through a ring of shared-memory stages (cp.async, four stages
// ahead) instead of held in registers. The per-warp tensor-core GEMV
// (gemv_mma.cu) keeps only four chunks of weights in flight a warp, and at
// 32 sequences its registers allow ~12 warps an SM: the step's batch-32
// GEMVs read at 18-19 % of DRAM bandwidth (kernels/cuda/step/PERF.md). Here a
// block of two warpgroups (one where a per-head input group has 64 rows)
// multiplies 128 weight rows by the sequences' inputs, split once a stage
// into three BF16 parts in shared memory (x = hi + mid + lo to 2^-27, as
// gemv_mma.cu) while the stage before is in the tensor cores, with a fresh
// accumulator every 32 K added in float; K is split over a cluster of up to
// 8 blocks (the grid kept within one wave) whose partial sums are added
// through distributed shared memory in rank order (the same bits every run).
// Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// The batches LaunchGemvBf16 gives the wgmma GEMV (where it fits).
// TP8 step beside gemv_mma.cu (device runs 95-96): batch 3 +0.6 %, 4 +0.1 %,
// 6 -1.4 %, 8 -1.3 %.
inline constexpr int kGemvWgmmaMinBatch = 6;
inline constexpr int kGemvWgmmaMaxBatch = 32;

// Whether g (rows_per_x set) suits it: k a multiple of 64, every 64-row
// block inside one input group, inputs 16-byte aligned, a batch of at most
// kGemvWgmmaMaxBatch, and a device that has wgmma (sm_90).
bool GemvBf16WgmmaFits(const Bf16Gemv& g);

// g with rows_per_x set, GemvBf16WgmmaFits(g).
GpuStatus LaunchGemvBf16Wgmma(const Bf16Gemv& g, cudaStream_t stream);

}  // namespace moetune::gpu
