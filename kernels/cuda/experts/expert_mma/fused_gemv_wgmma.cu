// fused_gemv_wgmma: the MoE layer at serving batches as two kinds of expert
// at once. Above 16 tokens the router lists the slots of more than 8
// tokens first (the shared expert, then the hot routed experts; layer.cuh):
// those fill grouped_wgmma's 32-token tiles, and grouped_wgmma's block
// kernel (TMA ring, fp16 decode, wgmma) runs them at tile 128x256; the rest,
// a few tokens each (at 128 tokens ~98 % of the routed experts), stream
// through fused_gemv's kernel of one 8-token n-tile, whose narrow registers
// let 24 warps onto an SM. Both downs add into y by atomics (fused_gemv's
// way; the router zeroed y), so no combine runs and y's last bits vary
// between runs. kernels/cuda/moe/PERF.md, "fused_gemv_wgmma", has the figures.
// Order: router; the wide slots' tiles, gate_up, down; the narrow slots'
// gate_up, down.
#include "kernels/backends/registry.h"
#include "kernels/cuda/experts/expert_mma/fused_gemv.cuh"
#include "kernels/cuda/experts/expert_mma/grouped_wgmma.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"

namespace moetune::gpu {
namespace {

static_assert(kWideSplitBatch == 16,
              "fused_gemv_wgmma_descriptor.cc's kMinTokens is one above it");

GpuStatus Launch(const LayerArgs& a, void* workspace, cudaStream_t stream) {
  if (a.geo.batch <= kWideSplitBatch) {
    return Fail(RunStatus::kCannotImplement,
                "fused_gemv_wgmma: needs more than " +
                    std::to_string(kWideSplitBatch) +
                    " tokens (the router's wide slots)");
  }
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
  MG_RETURN_IF_ERROR(LaunchWideWgmma(a, workspace, stream));
  return LaunchFusedGemvNarrow(a, stream);
}

}  // namespace
}  // namespace moetune::gpu

namespace moetune::backends::fused_gemv_wgmma {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{
      &Descriptor(), &gpu::WideWgmmaWorkspaceBytes, &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::fused_gemv_wgmma
