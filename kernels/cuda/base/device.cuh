// Device-level helpers shared by the probes and the runner: the process-wide
// device lock, the streaming-read kernel (bandwidth probe and L2 flush), and
// what this build carries. Thread-safety: DeviceMutex() guards the rest.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <string>

#include "kernels/cuda/base/cuda_util.cuh"

namespace moetune::gpu {

// Held by RunMoeLayer and MeasureReadBandwidthGBps while they use a device.
std::mutex& DeviceMutex();

// Reads `bytes` (a multiple of 16) of `buffer` once, 16-byte streaming loads;
// `sink` (4 bytes of device memory) keeps the loads from being elided.
GpuStatus LaunchReadSweep(const void* buffer, size_t bytes, unsigned* sink,
                          int sm_count, cudaStream_t stream);

// "90a" style list of the architectures this library was built for.
std::string BuiltArchs();

// Whether `ordinal` names a device this process can use; *sm its compute
// capability (90 for sm_90), else *why says what is missing.
bool UsableDevice(int ordinal, int* sm, std::string* why);

// Whether this library's kernel image loads on the current device; else
// *why says why not.
bool KernelImageLoads(std::string* why);

}  // namespace moetune::gpu
