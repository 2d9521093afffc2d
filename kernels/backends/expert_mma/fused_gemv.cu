// fused_gemv: router, then ONE stream-K launch for gate_up of every active
// expert (routed and shared, SiLU * up fused), then ONE for down (routing
// weight and combine fused: fp32 atomics into the output, so the order of
// the additions, and the last bits of y, vary between runs). The expert
// launches use programmatic dependent launch: gate_up streams the shared
// expert while the router still runs. Tile (block_n, block_k): block_n rows
// (16 or 32) per warp work unit, block_k K elements per unit; both are
// template parameters.
#include <string>

#include "kernels/backends/expert_mma/expert_mma_impl.cuh"
#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/launcher.cuh"
#include "kernels/cuda/router.cuh"

namespace moetune::gpu {
namespace {

constexpr int kFusedWarps = 4;

MmaJob BaseJob(const LayerArgs& a, bool gate_up) {
  MmaJob j = LayerJob(a, gate_up, kDecodeScale);
  j.b_src = gate_up ? a.buf.x16 : a.buf.h;
  j.b_by_position = gate_up ? 0 : 1;
  j.shared_first = gate_up && a.geo.has_shared ? 1 : 0;
  j.shared_expert = a.geo.num_local;
  return j;
}

template <int kRT, int kCPS, int kNT>
GpuStatus LaunchExperts(const LayerArgs& a, cudaStream_t stream) {
  MG_RETURN_IF_ERROR((LaunchExpertMma<kRT, kCPS, kNT, kFusedWarps, true>(
      BaseJob(a, true), a.device, a.sm_count, stream)));
  return LaunchExpertMma<kRT, kCPS, kNT, kFusedWarps, true>(
      BaseJob(a, false), a.device, a.sm_count, stream);
}

// n-tiles of 8 tokens: the shared expert (or one routed expert) may get
// every token of the batch.
template <int kRT, int kCPS>
GpuStatus LaunchTile(const LayerArgs& a, cudaStream_t stream) {
  const int b = a.geo.batch;
  if (b <= 8) return LaunchExperts<kRT, kCPS, 1>(a, stream);
  if (b <= 16) return LaunchExperts<kRT, kCPS, 2>(a, stream);
  if (b <= 32) return LaunchExperts<kRT, kCPS, 4>(a, stream);
  return LaunchExperts<kRT, kCPS, 8>(a, stream);
}

GpuStatus Launch(const LayerArgs& a, void*, cudaStream_t stream) {
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
#define MOETUNE_FUSED_LAUNCH(n, k)          \
  if (a.block_n == (n) && a.block_k == (k)) \
    return LaunchTile<(n) / 16, (k) / 64>(a, stream);
  MOETUNE_FUSED_GEMV_TILES(MOETUNE_FUSED_LAUNCH)
#undef MOETUNE_FUSED_LAUNCH
  return Fail(RunStatus::kCannotImplement, "fused_gemv: unknown tile");
}

}  // namespace
}  // namespace moetune::gpu

namespace moetune::backends::fused_gemv {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::NoWorkspace,
                                      &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::fused_gemv
