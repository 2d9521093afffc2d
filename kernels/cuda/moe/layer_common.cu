// The pieces the GPU backends share: gathering token rows and combining
// per-position outputs in a fixed order.
#include "kernels/cuda/moe/launcher.cuh"

namespace moetune::gpu {
namespace {

__global__ void GatherRowsKernel(const uint16_t* src, uint16_t* dst,
                                 const int* tok_list, const int* meta,
                                 int hidden) {
  const int p = blockIdx.x;
  if (p >= meta[kMetaPositions]) return;
  const uint4* s = reinterpret_cast<const uint4*>(
      src + static_cast<int64_t>(tok_list[p]) * hidden);
  uint4* d = reinterpret_cast<uint4*>(dst + static_cast<int64_t>(p) * hidden);
  for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) d[i] = s[i];
}

__global__ void CombineKernel(const float* yp, const int* tok_pos,
                              const float* tok_w, float* y, int batch,
                              int hidden, int slots_per_token,
                              int apply_weight) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(batch) * hidden) return;
  const int t = static_cast<int>(i / hidden), r = static_cast<int>(i % hidden);
  float sum = 0.0f;
  for (int j = 0; j < slots_per_token; ++j) {
    const int p = tok_pos[static_cast<int64_t>(t) * slots_per_token + j];
    if (p < 0) continue;
    const float v = yp[static_cast<int64_t>(p) * hidden + r];
    sum += apply_weight ? tok_w[p] * v : v;
  }
  y[i] = sum;
}

}  // namespace

GpuStatus LaunchGatherRows(const LayerArgs& args, const uint16_t* src,
                           uint16_t* dst, cudaStream_t stream) {
  if (args.geo.max_positions == 0) return OkStatus();
  GatherRowsKernel<<<args.geo.max_positions, 128, 0, stream>>>(
      src, dst, args.buf.tok_list, args.buf.meta, args.geo.hidden);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus LaunchCombine(const LayerArgs& args, const float* yp,
                        bool apply_weight, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(args.geo.batch) * args.geo.hidden;
  CombineKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      yp, args.buf.tok_pos, args.buf.tok_w, args.buf.y, args.geo.batch,
      args.geo.hidden, args.geo.top_k + 1, apply_weight ? 1 : 0);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

size_t NoWorkspace(const LayerArgs&) { return 0; }

}  // namespace moetune::gpu
