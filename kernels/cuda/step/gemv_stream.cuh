// The BF16 GEMV at a batch of two, its weights streamed through a ring of
// shared-memory stages by TMA bulk copies: one producer warp a block keeps
// its stages in flight (the first ones issued before the kernel waits for
// the kernels before it: weights are no kernel's output), and eight
// consumer warps sum each stage out of shared memory. The warp-a-row kernel
// (gemv.cu) keeps every load in registers, and at two sequences it spends
// them on a second set of accumulators: the streaming kernel made the TP8
// step 4.8 % faster at batch 2 (device run 75). At batch 1 it was slower in
// the step (+2 %, runs 75-77) though no slower alone (ncu, run 77: both
// ~18-20 us for the input projections' 34 MB, 36-40 % of DRAM bandwidth):
// its 64 KB of stages a block keep the next kernels' blocks off the SMs
// until it ends, so their start is no longer overlapped. Launch-only; not
// thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/step/gemv.cuh"

namespace moetune::gpu {

// How a GEMV's rows stream: each stage one bulk copy of rows_per_stage
// whole rows (rows short enough to share a stage), or of a 1 / pieces part
// of one row; blocks take rows_per_block consecutive rows each.
struct GemvStreamPlan {
  int rows_per_stage = 1;  // 1, 2, 4 or 8
  int pieces = 1;          // parts a row (rows_per_stage == 1 only)
  int piece_k = 0;         // K a piece: k / pieces
  int rows_per_block = 0;  // a multiple of rows_per_stage
  int blocks = 0;
};

// The plan for g on the current device, or false where the kernel does not
// take g (a batch other than 2, rows whose K does not split into whole
// 16-byte pieces, weights not 16-byte aligned). The device's SM count is
// read only for a shape it takes: every BF16 GEMV launch asks.
bool PlanGemvStream(const Bf16Gemv& g, GemvStreamPlan* plan);

// g (rows_per_x set) by the plan.
GpuStatus LaunchGemvBf16Stream(const Bf16Gemv& g, const GemvStreamPlan& plan,
                               cudaStream_t stream);

}  // namespace moetune::gpu
