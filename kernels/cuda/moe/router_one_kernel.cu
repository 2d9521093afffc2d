// The one-kernel router (router_parts.cuh): a block an expert computes its
// logits for every token, and the last block to finish picks every token's
// experts and builds the slot tables.
#include "kernels/cuda/moe/router_parts.cuh"

namespace moetune::gpu {
namespace {

__global__ void __launch_bounds__(kThreads) RouterKernel(RouterParams p) {
  __shared__ RouterShared sh;
  // The biases of this lane's experts for the last block's top-k, loaded
  // now so that they are not on its serial tail.
  float bias[kPerLane];
  LaneBiases(p, bias);
  const float one_bias =
      threadIdx.x < p.experts ? __ldg(p.buf.bias + threadIdx.x) : 0.0f;
  uint4 wv[kMaxPerThread];
  LoadWeights(p, wv);
  // The norm's output (x), and y and the tables that the kernels before
  // may still read, only after they are done.
  WaitForPriorKernels();
  // fused_gemv's gate_up may start now: it streams the shared expert, which
  // needs nothing from here, and waits for this grid before the rest. Not
  // before the wait: its shared expert reads the norm's output before its
  // own wait, so fused_gemv's steps would come out wrong.
  LetNextKernelStart();
  Logits(p, wv, sh);
  const bool last = IsLastBlock(p, sh, static_cast<int>(gridDim.x));
  if (!last) return;
  if (threadIdx.x == 0) *p.buf.router_counter = 0;  // ready for the next run
  if (p.batch == 1) {
    BlockSelectTopK(p, sh, one_bias);
    if (threadIdx.x >= 32) return;
    OneTokenTail(p, sh);
    return;
  }
  ManyTokenTail(p, sh, bias);
}

}  // namespace

GpuStatus LaunchOneKernelRouter(const LayerArgs& args, cudaStream_t stream) {
  return LaunchOverlapped(RouterKernel, args.geo.experts, kThreads, 0, stream,
                          args.launch, ParamsOf(args));
}

}  // namespace moetune::gpu
