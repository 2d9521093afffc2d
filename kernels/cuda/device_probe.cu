// QueryDevice, DeviceCount, PeerOrdinals, CompiledArchs,
// MeasureReadBandwidthGBps, NcclVersion and ProbeMoeBackend
// (kernels/cuda/moe_gpu.h).
#include <nccl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/backends/registry.h"
#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/device_probe.cuh"
#include "kernels/cuda/launcher.cuh"
#include "kernels/cuda/moe_gpu.h"

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

BackendAvailability DeviceCheck(int ordinal, int* sm) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {false, std::string("no CUDA device: ") + cudaGetErrorString(e)};
  }
  if (ordinal < 0 || ordinal >= count) {
    return {false, "no CUDA device " + std::to_string(ordinal) + " (" +
                       std::to_string(count) + " present)"};
  }
  std::string error;
  *sm = SmVersion(ordinal, &error);
  if (*sm < 0)
    return {false,
            "cannot read device " + std::to_string(ordinal) + ": " + error};
  return {true, ""};
}

std::string SmName(int sm) { return "sm_" + std::to_string(sm); }

std::string Needs(const backends::GpuNeeds& needs) {
  return "needs sm_" + std::to_string(needs.min_sm) +
         (needs.arch_specific ? "a" : "+") + " (" + std::string(needs.feature) +
         ")";
}

// Whether this device has what `backend` needs, beyond being present.
BackendAvailability CheckNeeds(const backends::BackendDescriptor& backend,
                               int sm) {
  const backends::GpuNeeds& needs = backend.gpu;
  if (!needs.not_implemented.empty()) {
    return {false, Needs(needs) + ": build targets sm_" + BuiltArchs() +
                       " only and device is " + SmName(sm) + "; " +
                       std::string(needs.not_implemented)};
  }
  if (sm < needs.min_sm || (needs.arch_specific && sm != needs.min_sm)) {
    return {false, Needs(needs) + ", device is " + SmName(sm)};
  }
  const std::vector<int> archs = CompiledArchs();
  if (std::find(archs.begin(), archs.end(), sm) == archs.end()) {
    return {false,
            "built for sm_" + BuiltArchs() + " only, device is " + SmName(sm)};
  }
  return {true, ""};
}

// The kernels load on `ordinal`, and a cuBLAS handle can be made where the
// backend needs one.
BackendAvailability CheckLoads(const backends::BackendDescriptor& backend,
                               int ordinal, int sm) {
  int current = 0;
  cudaGetDevice(&current);
  cudaSetDevice(ordinal);
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, ReadSweepKernel);
  BackendAvailability result{true, std::string(backend.name) +
                                       ": kernels for " + SmName(sm) + " load"};
  if (e != cudaSuccess) {
    cudaGetLastError();
    result = {false, std::string("kernel image does not load: ") +
                         cudaGetErrorString(e)};
  } else if (backend.gpu.cublas) {
    std::string error;
    const CublasApi* api = Cublas(&error);
    cublasHandle_t handle = nullptr;
    const cublasStatus_t s =
        api != nullptr ? api->create(&handle) : CUBLAS_STATUS_NOT_INITIALIZED;
    if (api == nullptr) {
      result = {false, "cuBLAS unavailable: " + error};
    } else if (s != CUBLAS_STATUS_SUCCESS) {
      result = {false,
                std::string("cuBLAS unavailable: ") + api->status_name(s)};
    } else {
      api->destroy(handle);
      result.reason += "; cuBLAS handle created";
    }
  }
  cudaSetDevice(current);
  return result;
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

DeviceInfo QueryDevice(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  int sm = 0;
  const BackendAvailability check = DeviceCheck(ordinal, &sm);
  if (!check.available) {
    info.error = check.reason;
    return info;
  }
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
  const BackendAvailability check = DeviceCheck(ordinal, &sm);
  double gbps = 0;
  GpuStatus status = check.available
                         ? MeasureBandwidth(ordinal, &gbps)
                         : Fail(RunStatus::kUnavailable, check.reason);
  if (!status.ok()) {
    if (error != nullptr) *error = status.message;
    return 0;
  }
  return gbps;
}

std::string NcclVersion() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) +
         "." + std::to_string(code % 100);
}

BackendAvailability ProbeMoeBackend(const std::string& name, int ordinal) {
  const backends::BackendDescriptor* backend = backends::FindBackend(name);
  if (backend == nullptr) {
    return {false, "unknown backend '" + name +
                       "'; known: " + backends::KnownBackendNames()};
  }
  if (!backend->is_gpu()) {
    return {false,
            "'" + name + "' is a CPU backend; the GPU library does not run it"};
  }
  int sm = 0;
  const BackendAvailability device = DeviceCheck(ordinal, &sm);
  if (!device.available) return device;
  const BackendAvailability needs = CheckNeeds(*backend, sm);
  if (!needs.available) return needs;
  if (FindLauncher(name) == nullptr) {
    return {false, "'" + name + "' is not built into this library"};
  }
  return CheckLoads(*backend, ordinal, sm);
}

}  // namespace moetune::gpu
