// grouped_mma: router; permutation (each token-slot position's activations
// gathered into contiguous rows, grouped by expert); a grouped GEMM over
// (64-token tile, block_n-row block) tiles on tensor cores for gate_up (SiLU
// * up fused) and for down (routing weight fused, one row per position);
// then the un-permutation, a fixed-order sum per token (no atomics: the
// output is the same bits every run). block_n = rows per block (16 per
// warp), block_k = K elements per pipeline stage.
#include <string>

#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/experts/expert_mma/expert_mma_impl.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"

namespace moetune::gpu {
namespace {

constexpr int kGroupedNt = kGroupedTokens / 8;

struct Workspace {
  __half* xp;  // [max_positions][hidden]
  float* yp;   // [max_positions][hidden]
};

Workspace Carve(const LayerArgs& a, void* base) {
  Carver c(base);
  const size_t n = static_cast<size_t>(a.geo.max_positions) * a.geo.hidden;
  Workspace w;
  w.xp = c.Take<__half>(n);
  w.yp = c.Take<float>(n);
  return w;
}

MmaJob Job(const LayerArgs& a, const Workspace& ws, bool gate_up) {
  MmaJob j = LayerJob(a, gate_up, kDecodeScale);
  j.b_src = gate_up ? ws.xp : a.buf.h;
  j.b_by_position = 1;
  j.yp = ws.yp;
  j.tile_bound = a.geo.max_tiles;
  return j;
}

template <int kBN, int kBK>
GpuStatus LaunchTile(const LayerArgs& a, const Workspace& ws,
                     cudaStream_t stream) {
  constexpr int kWarps = kBN / 16, kCPS = kBK / 64;
  MG_RETURN_IF_ERROR((LaunchExpertMma<1, kCPS, kGroupedNt, kWarps, false>(
      Job(a, ws, true), a.device, a.sm_count, stream)));
  return LaunchExpertMma<1, kCPS, kGroupedNt, kWarps, false>(
      Job(a, ws, false), a.device, a.sm_count, stream);
}

size_t WorkspaceBytes(const LayerArgs& a) {
  const size_t n = static_cast<size_t>(a.geo.max_positions) * a.geo.hidden;
  return Align256(n * sizeof(__half)) + Align256(n * sizeof(float));
}

GpuStatus Launch(const LayerArgs& a, void* workspace, cudaStream_t stream) {
  const Workspace ws = Carve(a, workspace);
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
  MG_RETURN_IF_ERROR(
      LaunchGatherRows(a, reinterpret_cast<const uint16_t*>(a.buf.x16),
                       reinterpret_cast<uint16_t*>(ws.xp), stream));
  GpuStatus status =
      Fail(RunStatus::kCannotImplement, "grouped_mma: unknown tile");
#define MOETUNE_GROUPED_LAUNCH(n, k)      \
  if (a.tile == backends::Tile{(n), (k)}) \
    status = LaunchTile<(n), (k)>(a, ws, stream);
  MOETUNE_GROUPED_MMA_TILES(MOETUNE_GROUPED_LAUNCH)
#undef MOETUNE_GROUPED_LAUNCH
  MG_RETURN_IF_ERROR(status);
  return LaunchCombine(a, ws.yp, false, stream);
}

}  // namespace
}  // namespace moetune::gpu

namespace moetune::backends::grouped_mma {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::WorkspaceBytes,
                                      &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::grouped_mma
