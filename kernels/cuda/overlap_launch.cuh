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

#include "kernels/cuda/carveout.h"
#include "kernels/cuda/cuda_util.cuh"

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

// Whether LaunchOverlapped overlaps, for launches from this thread (on by
// default; a bench turns it off to compare).
inline thread_local bool overlap_launches_enabled = true;

// Set: the next LaunchOverlapped or LaunchOverlappedInClusters from this
// thread launches plainly, and clears it. For the kernel after a fork or a
// join of streams: an overlapped launch waits only for the kernel before it
// in its own stream, and nothing promises that it also waits for an event
// waited on between; the kernels after it overlap again.
inline thread_local bool next_launch_plain = false;

// Whether each LaunchOverlapped and LaunchOverlappedInClusters from this
// thread asks the SMs for only the shared memory its grid needs
// (carveout.h FittedCarveout; off by default: the step turns it on, and off
// again for the launches where it measured slower).
inline thread_local bool fit_carveouts = false;

// Sets one of the thread's launch flags above for a scope.
class ScopedLaunchFlag {
 public:
  ScopedLaunchFlag(bool& flag, bool on) : flag_(flag), saved_(flag) {
    flag = on;
  }
  ~ScopedLaunchFlag() { flag_ = saved_; }
  ScopedLaunchFlag(const ScopedLaunchFlag&) = delete;
  ScopedLaunchFlag& operator=(const ScopedLaunchFlag&) = delete;

 private:
  bool& flag_;
  bool saved_;
};

class ScopedOverlapLaunches : public ScopedLaunchFlag {
 public:
  explicit ScopedOverlapLaunches(bool on)
      : ScopedLaunchFlag(overlap_launches_enabled, on) {}
};

class ScopedFitCarveouts : public ScopedLaunchFlag {
 public:
  explicit ScopedFitCarveouts(bool on) : ScopedLaunchFlag(fit_carveouts, on) {}
};

namespace overlap_detail {

// Whether this launch overlaps (and the one-shot plain flag consumed).
inline bool OverlapThisLaunch() {
  const bool plain = next_launch_plain;
  next_launch_plain = false;
  return overlap_launches_enabled && !plain;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the first `count`
// (at most 2) of `attributes`, and the fitted carveout where fit_carveouts
// is set; the launch checked.
template <typename... Params, typename... Args>
GpuStatus LaunchWith(void (*kernel)(Params...), dim3 grid, dim3 block,
                     size_t smem, cudaStream_t stream,
                     const cudaLaunchAttribute* attributes, int count,
                     Args&&... args) {
  cudaLaunchAttribute all[3] = {};
  if (count < 0 || count > 2) {
    return Fail(RunStatus::kCannotImplement,
                "a launch takes at most 2 attributes besides its carveout");
  }
  std::copy(attributes, attributes + count, all);
  if (fit_carveouts) {
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

// kernel<<<grid, block, smem, stream>>>(args...), overlapped with the
// kernel before it when overlap_launches_enabled; the launch checked.
template <typename... Params, typename... Args>
GpuStatus LaunchOverlapped(void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute = overlap_detail::Overlap();
  return overlap_detail::LaunchWith(
      kernel, grid, block, smem, stream, &attribute,
      overlap_detail::OverlapThisLaunch() ? 1 : 0, std::forward<Args>(args)...);
}

// As LaunchOverlapped, in clusters of cluster_x blocks along x (Hopper's
// thread block clusters: their blocks share their shared memory).
template <typename... Params, typename... Args>
GpuStatus LaunchOverlappedInClusters(void (*kernel)(Params...), dim3 grid,
                                     dim3 block, size_t smem,
                                     cudaStream_t stream, int cluster_x,
                                     Args&&... args) {
  cudaLaunchAttribute attributes[2] = {{}, overlap_detail::Overlap()};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = cluster_x;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  return overlap_detail::LaunchWith(
      kernel, grid, block, smem, stream, attributes,
      overlap_detail::OverlapThisLaunch() ? 2 : 1, std::forward<Args>(args)...);
}

}  // namespace moetune::gpu
