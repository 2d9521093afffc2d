// Overlapped launches (Hopper's programmatic dependent launch): a kernel
// launched with LaunchOverlapped may be scheduled while the kernel before it
// on the stream is still finishing, instead of after it has drained. In a
// decode step of ~1400 short kernels, each launch otherwise pays the ramp
// down of the one before it and its own ramp up (kernels of 3-20 us);
// overlapped, its blocks are resident and waiting when the previous kernel's
// last block ends.
//
// The contract, for every kernel launched this way: call
// WaitForPriorKernels() before reading anything an earlier kernel wrote and
// before writing anything an earlier kernel may still read (until then the
// kernel runs beside its predecessor); call LetNextKernelStart() when the
// next kernel may take the SM room this one leaves. Waiting transitively
// covers every earlier kernel, since each waited before it finished. Both
// calls do nothing in a normal launch. Captured in a CUDA graph, the
// overlap becomes the graph's programmatic edges.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cuda/base/carveout.h"
#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"

namespace moetune::gpu {

__device__ __forceinline__ void WaitForPriorKernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void LetNextKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// For kernels with nothing to do before their inputs are ready: the next
// kernel may be scheduled once every block of this one is (it then waits in
// turn), and this one waits for the kernels before it.
__device__ __forceinline__ void EnterAfterPriorKernels() {
  LetNextKernelStart();
  WaitForPriorKernels();
}

namespace overlap_detail {

// Whether a launch under `policy` overlaps.
inline bool Overlaps(const LaunchPolicy& policy) {
  return policy.overlap && !policy.plain_first;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the first `count`
// (at most 2) of `attributes`, and the fitted carveout where `fit_carveout`;
// the launch checked.
template <typename... Params, typename... Args>
GpuStatus LaunchWith(void (*kernel)(Params...), dim3 grid, dim3 block,
                     size_t smem, cudaStream_t stream, bool fit_carveout,
                     const cudaLaunchAttribute* attributes, int count,
                     Args&&... args) {
  cudaLaunchAttribute all[3] = {};
  if (count < 0 || count > 2) {
    return Fail(RunStatus::kCannotImplement,
                "a launch takes at most 2 attributes besides its carveout");
  }
  std::copy(attributes, attributes + count, all);
  if (fit_carveout) {
    const int percent = FittedCarveout(reinterpret_cast<const void*>(kernel),
                                       int64_t{grid.x} * grid.y * grid.z,
                                       block.x * block.y * block.z, smem);
    if (percent >= 0) {
      all[count].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
      all[count++].val.sharedMemCarveout = static_cast<unsigned>(percent);
    }
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = all;
  config.numAttrs = count;
  MG_CUDA(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  return OkStatus();
}

inline cudaLaunchAttribute Overlap() {
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  return attribute;
}

}  // namespace overlap_detail

// kernel<<<grid, block, smem, stream>>>(args...) as `policy` says (for a
// launch function's first kernel; its later ones take policy.Then()); the
// launch checked.
template <typename... Params, typename... Args>
GpuStatus LaunchOverlapped(void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t smem, cudaStream_t stream,
                           const LaunchPolicy& policy, Args&&... args) {
  cudaLaunchAttribute attribute = overlap_detail::Overlap();
  return overlap_detail::LaunchWith(
      kernel, grid, block, smem, stream, policy.fit_carveout, &attribute,
      overlap_detail::Overlaps(policy) ? 1 : 0, std::forward<Args>(args)...);
}

// As LaunchOverlapped, in clusters of cluster_x blocks along x (Hopper's
// thread block clusters: their blocks share their shared memory).
template <typename... Params, typename... Args>
GpuStatus LaunchOverlappedInClusters(void (*kernel)(Params...), dim3 grid,
                                     dim3 block, size_t smem,
                                     cudaStream_t stream,
                                     const LaunchPolicy& policy, int cluster_x,
                                     Args&&... args) {
  cudaLaunchAttribute attributes[2] = {{}, overlap_detail::Overlap()};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = cluster_x;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  return overlap_detail::LaunchWith(
      kernel, grid, block, smem, stream, policy.fit_carveout, attributes,
      overlap_detail::Overlaps(policy) ? 2 : 1, std::forward<Args>(args)...);
}

}  // namespace moetune::gpu
