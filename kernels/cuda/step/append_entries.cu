// LaunchAppendEntries (step_ops.cuh): the step's new latent entries and
// indexer keys into the caches, in the cache's format.
#include "kernels/cuda/step/ops_parts.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

__global__ void AppendEntriesKernel(AppendEntries a) {
  EnterAfterPriorKernels();
  const int b = blockIdx.x;
  const int64_t row = static_cast<int64_t>(b) * a.stride + a.position;
  for (int i = threadIdx.x; i < a.latent_dim; i += blockDim.x) {
    a.latent[row * a.latent_dim + i] =
        FloatToBf16(a.latent_entry[b * a.latent_dim + i]);
  }
  for (int i = threadIdx.x; i < a.key_dim; i += blockDim.x) {
    a.keys[row * a.key_dim + i] = nvfp4::FloatToE4M3(a.key[b * a.key_dim + i]);
  }
}

// One block a sequence, warp w the latent groups w, w + 8, ...: the group's
// amax by shuffles, its scale, its values encoded; then the rope key and
// the indexer key by every thread.
__global__ void AppendFp8EntriesKernel(AppendEntries a) {
  EnterAfterPriorKernels();
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const kvfp8::RowLayout layout =
      kvfp8::RowLayoutOf(a.kv_lora, a.latent_dim - a.kv_lora);
  const int64_t row = static_cast<int64_t>(b) * a.stride + a.position;
  uint8_t* out = a.latent_fp8 + row * layout.bytes;
  const float* entry = a.latent_entry + static_cast<int64_t>(b) * a.latent_dim;
  const int groups = kvfp8::Groups(a.kv_lora);
  for (int g = warp; g < groups; g += blockDim.x / 32) {
    const int g0 = g * kvfp8::kGroupSize;
    const int end = min(a.kv_lora, g0 + kvfp8::kGroupSize);
    float amax = 0.0f;
    for (int d = g0 + lane; d < end; d += 32)
      amax = fmaxf(amax, fabsf(entry[d]));
    const float scale = kvfp8::GroupScale(WarpMax(amax));
    for (int d = g0 + lane; d < end; d += 32)
      out[d] = kvfp8::Encode(entry[d], scale);
    if (lane == 0) reinterpret_cast<float*>(out + layout.scales)[g] = scale;
  }
  uint16_t* rope = reinterpret_cast<uint16_t*>(out + layout.rope);
  for (int i = a.kv_lora + threadIdx.x; i < a.latent_dim; i += blockDim.x) {
    rope[i - a.kv_lora] = FloatToBf16(entry[i]);
  }
  for (int i = threadIdx.x; i < a.key_dim; i += blockDim.x) {
    a.keys[row * a.key_dim + i] = nvfp4::FloatToE4M3(a.key[b * a.key_dim + i]);
  }
}

}  // namespace

GpuStatus LaunchAppendEntries(const AppendEntries& a, cudaStream_t stream,
                              const LaunchPolicy& policy) {
  return LaunchOverlapped(
      a.latent_fp8 != nullptr ? AppendFp8EntriesKernel : AppendEntriesKernel,
      a.batch, 256, 0, stream, policy, a);
}

}  // namespace moetune::gpu
