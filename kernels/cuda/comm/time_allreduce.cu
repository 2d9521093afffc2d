// TimeAllReduce (kernels/cuda/comm_gpu.h): one rank's timing and check of
// the gang's sum, as nccl-tests measures it.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/comm_gpu.h"
#include "kernels/cuda/cuda_util.cuh"

namespace moetune::gpu {
namespace {

// Rank r's element i: small integers times (r + 1), so every partial sum is
// exact in float whatever the order and the sum is known in closed form.
__global__ void FillRankPattern(float* data, int64_t n, int rank) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) data[i] = static_cast<float>((i % 13) - 6) * (rank + 1);
}

int64_t CountWrong(const std::vector<float>& got, int world) {
  const double ranks = world * (world + 1) / 2.0;  // sum of (r + 1)
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want =
        static_cast<double>((static_cast<int64_t>(i) % 13) - 6) * ranks;
    if (got[i] != want) ++wrong;
  }
  return wrong;
}

struct Calls {
  GangComm* comm;
  float* data;
  int64_t n;
  cudaStream_t stream;
  GpuStatus Run(int count) const {
    for (int i = 0; i < count; ++i) {
      std::string why;
      if (comm->AllReduceSum(data, n, stream, &why) != RunStatus::kOk) {
        return Fail(RunStatus::kCudaError, why);
      }
    }
    return OkStatus();
  }
};

// The timed sums: captured into one graph (when in_graph) before any rank
// sums, so that no capture or instantiation overlaps a peer's kernels.
struct Timed {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Timed() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

GpuStatus PrepareTimed(const Calls& calls, int iterations, bool in_graph,
                       Timed* t) {
  MG_CUDA(cudaEventCreate(&t->start));
  MG_CUDA(cudaEventCreate(&t->stop));
  if (!in_graph) return OkStatus();
  MG_CUDA(
      cudaStreamBeginCapture(calls.stream, cudaStreamCaptureModeThreadLocal));
  GpuStatus captured = calls.Run(iterations);
  MG_CUDA(cudaStreamEndCapture(calls.stream, &t->graph));
  MG_RETURN_IF_ERROR(captured);
  MG_CUDA(cudaGraphInstantiate(&t->exec, t->graph, 0));
  MG_CUDA(cudaGraphUpload(t->exec, calls.stream));
  return OkStatus();
}

// Enqueues the warm-up, the timed sums between two events, and the checked
// sum of the rank pattern; nothing here waits for the device.
GpuStatus Enqueue(const Calls& calls, int warmup, int iterations,
                  const Timed& t) {
  MG_RETURN_IF_ERROR(calls.Run(warmup));
  MG_CUDA(cudaEventRecord(t.start, calls.stream));
  if (t.exec != nullptr) {
    MG_CUDA(cudaGraphLaunch(t.exec, calls.stream));
  } else {
    MG_RETURN_IF_ERROR(calls.Run(iterations));
  }
  MG_CUDA(cudaEventRecord(t.stop, calls.stream));
  FillRankPattern<<<static_cast<unsigned>((calls.n + 255) / 256), 256, 0,
                    calls.stream>>>(calls.data, calls.n, calls.comm->rank());
  MG_CHECK_LAUNCH();
  return calls.Run(1);
}

GpuStatus Measure(GangComm* comm, int64_t n, int warmup, int iterations,
                  bool in_graph, const std::function<void()>& meet,
                  AllReduceTiming* out) {
  DeviceBuffer buffer;
  std::vector<float> got(n);
  // The rank's own stream (comm_gpu.h says why not a new one).
  const auto stream = static_cast<cudaStream_t>(comm->stream());
  GpuStatus status = buffer.Allocate(n * sizeof(float));  // zeros: timed
  const Calls calls{comm, buffer.as<float>(), n, stream};
  Timed timed;
  // Allocation synchronises the device, which a capture in progress on
  // another rank's thread forbids: every rank allocates, then captures.
  if (meet) meet();
  if (status.ok()) status = PrepareTimed(calls, iterations, in_graph, &timed);
  if (meet) meet();  // every rank captured before any sums
  if (status.ok()) status = Enqueue(calls, warmup, iterations, timed);
  // Every rank has launched all its sums before any rank waits: a copy to
  // pageable memory holds the context while it waits for this rank's
  // kernels, which wait for the other ranks' launches.
  if (meet) meet();
  if (status.ok()) {
    const cudaError_t synced = cudaStreamSynchronize(stream);
    const cudaError_t e =
        synced != cudaSuccess
            ? synced
            : cudaMemcpy(got.data(), calls.data, n * sizeof(float),
                         cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      status = CudaFailure(e, "the sums", __FILE__, __LINE__);
    }
  }
  if (meet) meet();  // every rank done before anything is freed
  MG_RETURN_IF_ERROR(status);
  float ms = 0;
  MG_CUDA(cudaEventElapsedTime(&ms, timed.start, timed.stop));
  out->time_us = 1000.0 * ms / iterations;
  std::string why;
  if (comm->Check(&why) != RunStatus::kOk) {
    return Fail(RunStatus::kCudaError, why);
  }
  out->wrong = CountWrong(got, comm->world());
  return OkStatus();
}

}  // namespace

RunStatus TimeAllReduce(GangComm* comm, int64_t floats, int warmup,
                        int iterations, bool in_graph,
                        const std::function<void()>& meet, AllReduceTiming* out,
                        std::string* error) {
  if (floats < 1 || iterations < 1 || warmup < 0) {
    *error = "floats and iterations must be >= 1, warmup >= 0";
    return RunStatus::kBadProblem;
  }
  if (cudaSetDevice(comm->device()) != cudaSuccess) {
    *error = "cannot use device " + std::to_string(comm->device());
    return RunStatus::kCudaError;
  }
  const GpuStatus status =
      Measure(comm, floats, warmup, iterations, in_graph, meet, out);
  if (!status.ok()) *error = status.message;
  return status.code;
}

}  // namespace moetune::gpu
