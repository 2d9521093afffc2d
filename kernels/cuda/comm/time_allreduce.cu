// TimeCollective (kernels/cuda/comm/comm_gpu.h): one rank's timing and check of
// the gang's all-reduce, all-gather or reduce-scatter, as nccl-tests
// measures them.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/comm/comm_gpu.h"

namespace moetune::gpu {
namespace {

// Rank r's element i: small integers times (r + 1), so every partial sum is
// exact in float whatever the order and the sum is known in closed form.
__global__ void FillRankPattern(float* data, int64_t n, int rank) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) data[i] = static_cast<float>((i % 13) - 6) * (rank + 1);
}

// The exact result of element i of what this rank gets back: the sum of
// every rank's pattern, or (all-gather) rank i / n's own pattern.
double Want(CollectiveOp op, int64_t i, int64_t n, int rank, int world) {
  const double ranks = world * (world + 1) / 2.0;  // sum of (r + 1)
  switch (op) {
    case CollectiveOp::kAllGather:
      return static_cast<double>((i % n) % 13 - 6) * (i / n + 1);
    case CollectiveOp::kReduceScatter:
      return static_cast<double>((rank * n + i) % 13 - 6) * ranks;
    default:
      return static_cast<double>(i % 13 - 6) * ranks;
  }
}

int64_t CountWrong(const std::vector<float>& got, CollectiveOp op, int64_t n,
                   int rank, int world) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != Want(op, static_cast<int64_t>(i), n, rank, world)) ++wrong;
  }
  return wrong;
}

// n floats a rank: an all-reduce sums data[n] in place; an all-gather fills
// data[world][n] in place from each rank's row; a reduce-scatter sums
// data[world][n] into out[n].
struct Calls {
  GangComm* comm;
  CollectiveOp op;
  float* data;
  float* out;
  int64_t n;
  cudaStream_t stream;
  GpuStatus Run(int count) const {
    for (int i = 0; i < count; ++i) {
      std::string why;
      RunStatus st = RunStatus::kOk;
      if (op == CollectiveOp::kAllGather) {
        st = comm->AllGatherInPlace(data, n * 4, stream, &why);
      } else if (op == CollectiveOp::kReduceScatter) {
        st = comm->ReduceScatterSum(data, out, n, stream, &why);
      } else {
        st = comm->AllReduceSum(data, n, stream, &why);
      }
      if (st != RunStatus::kOk) return Fail(RunStatus::kCudaError, why);
    }
    return OkStatus();
  }
  // The floats this rank's pattern fills (at `Filled`), and those it gets.
  int64_t Filled() const {
    return op == CollectiveOp::kReduceScatter ? comm->world() * n : n;
  }
  float* FilledAt() const {
    return op == CollectiveOp::kAllGather ? data + comm->rank() * n : data;
  }
  int64_t Got() const {
    return op == CollectiveOp::kAllGather ? comm->world() * n : n;
  }
  const float* GotAt() const {
    return op == CollectiveOp::kReduceScatter ? out : data;
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
  FillRankPattern<<<static_cast<unsigned>((calls.Filled() + 255) / 256), 256, 0,
                    calls.stream>>>(calls.FilledAt(), calls.Filled(),
                                    calls.comm->rank());
  MG_CHECK_LAUNCH();
  return calls.Run(1);
}

GpuStatus Measure(GangComm* comm, CollectiveOp op, int64_t n, int warmup,
                  int iterations, bool in_graph,
                  const std::function<void()>& meet, AllReduceTiming* out) {
  DeviceBuffer buffer;
  // The rank's own stream (comm_gpu.h says why not a new one).
  const auto stream = static_cast<cudaStream_t>(comm->stream());
  const int64_t rows = op == CollectiveOp::kAllReduce ? 1 : comm->world();
  // Zeros for the timed calls; a reduce-scatter's output after its input.
  GpuStatus status = buffer.Allocate((rows + 1) * n * sizeof(float));
  // The pattern kernel loaded before any rank's sums spin (oneshot.cuh
  // LoadOneShotKernel says why): its first launch comes after them.
  cudaFuncAttributes pattern{};
  if (status.ok() &&
      cudaFuncGetAttributes(&pattern, FillRankPattern) != cudaSuccess) {
    status = Fail(RunStatus::kCudaError, "cannot load FillRankPattern");
  }
  const Calls calls{
      comm, op, buffer.as<float>(), buffer.as<float>() + rows * n, n, stream};
  std::vector<float> got(calls.Got());
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
            : cudaMemcpy(got.data(), calls.GotAt(), got.size() * sizeof(float),
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
  out->wrong = CountWrong(got, op, n, comm->rank(), comm->world());
  return OkStatus();
}

}  // namespace

RunStatus TimeCollective(GangComm* comm, CollectiveOp op, int64_t floats,
                         int warmup, int iterations, bool in_graph,
                         const std::function<void()>& meet,
                         AllReduceTiming* out, std::string* error) {
  if (floats < 1 || iterations < 1 || warmup < 0) {
    *error = "floats and iterations must be >= 1, warmup >= 0";
    return RunStatus::kBadProblem;
  }
  if (cudaSetDevice(comm->device()) != cudaSuccess) {
    *error = "cannot use device " + std::to_string(comm->device());
    return RunStatus::kCudaError;
  }
  const GpuStatus status =
      Measure(comm, op, floats, warmup, iterations, in_graph, meet, out);
  if (!status.ok()) *error = status.message;
  return status.code;
}

RunStatus TimeAllReduce(GangComm* comm, int64_t floats, int warmup,
                        int iterations, bool in_graph,
                        const std::function<void()>& meet, AllReduceTiming* out,
                        std::string* error) {
  return TimeCollective(comm, CollectiveOp::kAllReduce, floats, warmup,
                        iterations, in_graph, meet, out, error);
}

}  // namespace moetune::gpu
