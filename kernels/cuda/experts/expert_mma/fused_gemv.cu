// fused_gemv: router, then ONE stream-K launch for gate_up of every active
// expert (routed and shared, SiLU * up fused; above 16 tokens two, the
// experts of more than 8 tokens apart, in 64-token tiles), then ONE (two)
// for down (routing weight and combine fused: fp32 atomics into the output,
// so the order of the additions, and the last bits of y, vary between
// runs). The expert launches use programmatic dependent launch: gate_up
// streams the shared expert while the router still runs. Tile (block_n,
// block_k): block_n rows (16 or 32) per warp work unit, block_k K elements
// per unit; both are template parameters.
#include <string>

#include "kernels/backends/expert_mma/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/experts/expert_mma/expert_mma_impl.cuh"
#include "kernels/cuda/experts/expert_mma/fused_gemv.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"

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

// gate_up's or down's job over `part` of the slots.
MmaJob PartJob(const LayerArgs& a, bool gate_up, int part) {
  MmaJob j = BaseJob(a, gate_up);
  j.slot_part = part;
  if (part == kNarrowSlots) j.shared_first = 0;  // the wide part has it
  return j;
}

template <int kRT, int kCPS, int kNT>
GpuStatus LaunchExperts(const LayerArgs& a, cudaStream_t stream) {
  MG_RETURN_IF_ERROR((LaunchExpertMma<kRT, kCPS, kNT, kFusedWarps, true>(
      PartJob(a, true, kAllSlots), a.device, a.sm_count, stream)));
  return LaunchExpertMma<kRT, kCPS, kNT, kFusedWarps, true>(
      PartJob(a, false, kAllSlots), a.device, a.sm_count, stream);
}

// Above 16 tokens: the wide slots (the shared expert, and any routed expert
// of more than 8 tokens; they lead the router's list) at kNT n-tiles, a unit
// a 64-token tile of a slot (one tile a slot up to 64 tokens), then
// the rest (at batch 32 ~1.6 tokens a routed expert on TP8 slices, ~1 on
// whole experts) by a kernel of one n-tile, whose fewer registers let more
// warps onto an SM (the glm5 layer, 16x512, uniform, one kernel -> split:
// batch 32 1100 -> 1040 us, 64 1686 -> 1406). At 9-16 tokens the two extra
// launches cost more than the narrow kernel saves (TP8 step batch 16
// +2.7 %), so those keep one kernel.
template <int kRT, int kCPS, int kNT>
GpuStatus LaunchSplit(const LayerArgs& a, cudaStream_t stream) {
  for (const bool gate_up : {true, false}) {
    MG_RETURN_IF_ERROR((LaunchExpertMma<kRT, kCPS, kNT, kFusedWarps, true>(
        PartJob(a, gate_up, kWideSlots), a.device, a.sm_count, stream)));
    MG_RETURN_IF_ERROR((LaunchExpertMma<kRT, kCPS, 1, kFusedWarps, true>(
        PartJob(a, gate_up, kNarrowSlots), a.device, a.sm_count, stream)));
  }
  return OkStatus();
}

// n-tiles of 8 tokens: the shared expert (or one routed expert) may get
// every token of the batch; above 64 the wide kernel takes it a 64-token
// tile at a time.
template <int kRT, int kCPS>
GpuStatus LaunchTile(const LayerArgs& a, cudaStream_t stream) {
  const int b = a.geo.batch;
  static_assert(kWideTokens == 8 && kWideSplitBatch == 16,
                "one n-tile holds the narrow slots; the split starts at kNT 4");
  if (b <= 8) return LaunchExperts<kRT, kCPS, 1>(a, stream);
  if (b <= 16) return LaunchExperts<kRT, kCPS, 2>(a, stream);
  if (b <= 32) return LaunchSplit<kRT, kCPS, 4>(a, stream);
  return LaunchSplit<kRT, kCPS, 8>(a, stream);
}

// The narrow slots' gate_up, then their down, by the kernel of one n-tile.
template <int kRT, int kCPS>
GpuStatus LaunchNarrow(const LayerArgs& a, cudaStream_t stream) {
  for (const bool gate_up : {true, false}) {
    MG_RETURN_IF_ERROR((LaunchExpertMma<kRT, kCPS, 1, kFusedWarps, true>(
        PartJob(a, gate_up, kNarrowSlots), a.device, a.sm_count, stream)));
  }
  return OkStatus();
}

// launch.template operator()<kRT, kCPS>() at the run's tile, one of
// fused_gemv's.
template <class F>
GpuStatus AtTile(const LayerArgs& a, const F& launch) {
#define MOETUNE_FUSED_AT(n, k)            \
  if (a.tile == backends::Tile{(n), (k)}) \
    return launch.template operator()<(n) / 16, (k) / 64>();
  MOETUNE_FUSED_GEMV_TILES(MOETUNE_FUSED_AT)
#undef MOETUNE_FUSED_AT
  return Fail(RunStatus::kCannotImplement, "fused_gemv: unknown tile");
}

GpuStatus Launch(const LayerArgs& a, void*, cudaStream_t stream) {
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
  return AtTile(
      a, [&]<int kRT, int kCPS>() { return LaunchTile<kRT, kCPS>(a, stream); });
}

}  // namespace

GpuStatus LaunchFusedGemvNarrow(const LayerArgs& a, cudaStream_t stream) {
  return AtTile(a, [&]<int kRT, int kCPS>() {
    return LaunchNarrow<kRT, kCPS>(a, stream);
  });
}

}  // namespace moetune::gpu

namespace moetune::backends::fused_gemv {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::NoWorkspace,
                                      &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::fused_gemv
