// LaunchRouter (router.cuh): the router of the layer's batch.
#include "kernels/cuda/moe/router_parts.cuh"

namespace moetune::gpu {
namespace {

// From kFewTokens tokens the logits go on tensor cores in clusters: at 2-4
// tokens the one-kernel router measured 0.4-0.7 % faster in the decode step,
// at 8 they tie on TP8 and the clusters win 1 % on EP8, at 16 and 32 they
// win 1-2.5 %.
constexpr int kFewTokens = 8;
// From kManyTokens tokens three wide kernels: below 64 they lose to the
// clusters (from 16 they made the TP8 decode step 0.6-0.9 % faster at 32
// tokens but 3.3 % slower at 16).
constexpr int kManyTokens = 64;

}  // namespace

GpuStatus LaunchRouter(const LayerArgs& args, cudaStream_t stream) {
  const Geometry& g = args.geo;
  const bool tiles = g.experts % 8 == 0 && g.hidden % 64 == 0;
  if (tiles && g.batch >= kManyTokens) {
    return LaunchManyTokenRouter(args, stream);
  }
  if (tiles && g.batch >= kFewTokens) return LaunchFewTokenRouter(args, stream);
  return LaunchOneKernelRouter(args, stream);
}

}  // namespace moetune::gpu
