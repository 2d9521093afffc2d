// The GPU library's device queries and the status every GPU entry point
// reports: plain C++ (no CUDA, abseil or gRPC headers), so the worker,
// compiled by g++, reads them. kernels/cuda/no_cuda.cc answers them where the
// build has no CUDA. Every function is safe to call without a GPU and
// thread-safe; MeasureReadBandwidthGBps uses the device exclusively.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moetune::gpu {

// Whether this build carries the CUDA library (false: the no-CUDA stand-in).
bool BuiltWithCuda();

struct DeviceInfo {
  bool present = false;
  int ordinal = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0, sm_count = 0;
  int64_t memory_bytes = 0;
  int sm_clock_mhz = 0, mem_clock_mhz = 0;
  int driver_version = 0, runtime_version = 0;  // CUDA's 13000-style ints
  std::string error;                            // why not present
};

DeviceInfo QueryDevice(int ordinal);
int DeviceCount();  // 0 when there is no driver or device
// The other ordinals this device can reach peer to peer (cudaDeviceCanAccess-
// Peer), ascending; empty without CUDA or a device.
std::vector<int> PeerOrdinals(int ordinal);
std::vector<int> CompiledArchs();  // e.g. {90}
// Streaming read bandwidth (GB/s, 1e9 B/s) over a buffer far larger than L2.
double MeasureReadBandwidthGBps(int ordinal, std::string* error);

enum class RunStatus {
  kOk,
  kCannotImplement,
  kBadProblem,
  kUnavailable,
  kCudaError
};

}  // namespace moetune::gpu
