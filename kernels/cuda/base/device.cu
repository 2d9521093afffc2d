// The device queries of kernels/cuda/base/device.h and the device-level
// helpers of device.cuh.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/base/device.h"

#ifndef MOETUNE_CUDA_ARCHS_STR
#define MOETUNE_CUDA_ARCHS_STR "unknown"
#endif

namespace moetune::gpu {
namespace {

__global__ void ReadSweepKernel(const uint4* p, int64_t n, unsigned* sink) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride);
    const uint4 c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never; keeps the loads
}

__global__ void FillKernel(uint4* p, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const uint32_t v = static_cast<uint32_t>(i) * 2654435761u;
    p[i] = make_uint4(v, v ^ 1u, v ^ 2u, v ^ 3u);
  }
}

int SmVersion(int ordinal, std::string* error) {
  cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *error = std::string(cudaGetErrorString(e));
    return -1;
  }
  return prop.major * 10 + prop.minor;
}

GpuStatus TimeSweeps(const DeviceBuffer& buf, unsigned* sink, int sm_count,
                     std::vector<double>* gbps) {
  cudaEvent_t start, stop;
  MG_CUDA(cudaEventCreate(&start));
  MG_CUDA(cudaEventCreate(&stop));
  GpuStatus status;
  for (int it = 0; it < 13 && status.ok(); ++it) {
    cudaEventRecord(start);
    status = LaunchReadSweep(buf.get(), buf.bytes(), sink, sm_count, nullptr);
    cudaEventRecord(stop);
    float ms = 0;
    if (status.ok() && cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && it >= 3) {
      gbps->push_back(static_cast<double>(buf.bytes()) / (ms * 1e-3) / 1e9);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  MG_RETURN_IF_ERROR(status);
  MG_CUDA(cudaGetLastError());
  return OkStatus();
}

GpuStatus MeasureBandwidth(int ordinal, double* out) {
  MG_CUDA(cudaSetDevice(ordinal));
  int sm_count = 0;
  MG_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount,
                                 ordinal));
  DeviceBuffer buf, sink;
  MG_RETURN_IF_ERROR(buf.Allocate(size_t{2} << 30));
  MG_RETURN_IF_ERROR(sink.Allocate(256));
  FillKernel<<<sm_count * 8, 256>>>(buf.as<uint4>(),
                                    static_cast<int64_t>(buf.bytes() / 16));
  MG_CHECK_LAUNCH();
  std::vector<double> gbps;
  MG_RETURN_IF_ERROR(TimeSweeps(buf, sink.as<unsigned>(), sm_count, &gbps));
  if (gbps.empty())
    return Fail(RunStatus::kCudaError, "no bandwidth sample was timed");
  std::sort(gbps.begin(), gbps.end());
  *out = gbps[gbps.size() / 2];
  return OkStatus();
}

}  // namespace

std::mutex& DeviceMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

GpuStatus LaunchReadSweep(const void* buffer, size_t bytes, unsigned* sink,
                          int sm_count, cudaStream_t stream) {
  ReadSweepKernel<<<sm_count * 8, 256, 0, stream>>>(
      static_cast<const uint4*>(buffer), static_cast<int64_t>(bytes / 16),
      sink);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

std::string BuiltArchs() { return MOETUNE_CUDA_ARCHS_STR; }

bool UsableDevice(int ordinal, int* sm, std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("no CUDA device: ") + cudaGetErrorString(e);
    return false;
  }
  if (ordinal < 0 || ordinal >= count) {
    *why = "no CUDA device " + std::to_string(ordinal) + " (" +
           std::to_string(count) + " present)";
    return false;
  }
  std::string error;
  *sm = SmVersion(ordinal, &error);
  if (*sm < 0) {
    *why = "cannot read device " + std::to_string(ordinal) + ": " + error;
    return false;
  }
  return true;
}

bool KernelImageLoads(std::string* why) {
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, ReadSweepKernel);
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  *why = std::string("kernel image does not load: ") + cudaGetErrorString(e);
  return false;
}

bool BuiltWithCuda() { return true; }

DeviceInfo QueryDevice(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  int sm = 0;
  if (!UsableDevice(ordinal, &sm, &info.error)) return info;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, ordinal);
  info.present = true;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal) ==
      cudaSuccess) {
    info.sm_clock_mhz = khz / 1000;
  }
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ordinal) ==
      cudaSuccess) {
    info.mem_clock_mhz = khz / 1000;
  }
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  cudaGetLastError();
  return info;
}

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::vector<int> PeerOrdinals(int ordinal) {
  std::vector<int> peers;
  const int count = DeviceCount();
  for (int peer = 0; peer < count; ++peer) {
    if (peer == ordinal) continue;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, ordinal, peer) != cudaSuccess) {
      cudaGetLastError();  // not sticky: a bad ordinal, say
      continue;
    }
    if (can != 0) peers.push_back(peer);
  }
  return peers;
}

std::vector<int> CompiledArchs() {
#ifdef __CUDA_ARCH_LIST__
  const std::vector<int> list = {__CUDA_ARCH_LIST__};
#else
  const std::vector<int> list;
#endif
  std::vector<int> archs;
  for (int a : list) archs.push_back(a / 10);
  return archs;
}

double MeasureReadBandwidthGBps(int ordinal, std::string* error) {
  std::lock_guard<std::mutex> lock(DeviceMutex());
  int sm = 0;
  std::string why;
  double gbps = 0;
  GpuStatus status = UsableDevice(ordinal, &sm, &why)
                         ? MeasureBandwidth(ordinal, &gbps)
                         : Fail(RunStatus::kUnavailable, why);
  if (!status.ok()) {
    if (error != nullptr) *error = status.message;
    return 0;
  }
  return gbps;
}

}  // namespace moetune::gpu
