// moetune-read-bench: what one kernel launch can read, nothing computed --
// the bound under the step's GEMVs (kernels/cuda/step/PERF.md). A matrix
// of `rows` rows of `row_bytes` (default the input projections' 2784 x
// 12288 B, 34 MB) is read once by a grid of cp.async rings in several
// shapes (rows a block, contiguous bytes a row a stage, stages, K split
// over blocks), and by the bandwidth probe's streaming kernel; L2 flushed
// before each launch (a 192 MB read), CUDA events around the launch, the
// best of 5 after 2 warm-ups.
//
//   moetune-read-bench [--rows=2784] [--row_bytes=12288] [--device=D]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/backends/expert_mma/hopper_async.cuh"
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/device_probe.cuh"

namespace moetune::gpu {
namespace {

using mma_detail::CpAsync16;
using mma_detail::CpAsyncCommit;
using mma_detail::CpAsyncWait;

// A block: kRows rows x its rank's share of each row, kStageBytes of a row
// a stage through a ring of kStages; consecutive threads copy consecutive
// 16 bytes of a row. The first word of each stage is summed into *sink (so
// nothing is elided).
template <int kRows, int kStageBytes, int kStages, int kThreads>
__global__ void __launch_bounds__(kThreads)
    RingReadKernel(const uint8_t* w, int row_bytes, int rows, int ranks,
                   unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kBytes = kRows * kStageBytes;
  constexpr int kPieces = kBytes / 16 / kThreads;
  const int rank = blockIdx.x % ranks, r0 = (blockIdx.x / ranks) * kRows;
  const int stages = row_bytes / kStageBytes;
  const int first = rank * stages / ranks;
  const int count = (rank + 1) * stages / ranks - first;
  const auto issue = [&](int i) {
    uint8_t* stage = smem + (i % kStages) * kBytes;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int q = threadIdx.x + p * kThreads;
      const int r = min(r0 + q / (kStageBytes / 16), rows - 1);
      const int64_t at = static_cast<int64_t>(r) * row_bytes +
                         static_cast<int64_t>(first + i) * kStageBytes +
                         (q % (kStageBytes / 16)) * 16;
      CpAsync16(stage + q * 16, w + at);
    }
  };
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) issue(i);
    CpAsyncCommit();
  }
  unsigned acc = 0;
  for (int i = 0; i < count; ++i) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    acc += *reinterpret_cast<const unsigned*>(smem + (i % kStages) * kBytes +
                                              threadIdx.x * 16);
    if (i + kStages - 1 < count) issue(i + kStages - 1);
    CpAsyncCommit();
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

struct Buffers {
  uint8_t* matrix = nullptr;
  uint8_t* flush = nullptr;
  unsigned* sink = nullptr;
  size_t bytes = 0, flush_bytes = size_t{192} << 20;
  int rows = 0, row_bytes = 0, sm_count = 0;
};

// Best of 5 timed launches (after 2), each after an L2 flush; us.
template <class Launch>
float BestUs(const Buffers& b, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 1e30f;
  for (int it = 0; it < 7; ++it) {
    LaunchReadSweep(b.flush, b.flush_bytes, b.sink, b.sm_count, nullptr);
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (it >= 2) best = std::min(best, ms * 1000.0f);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

void Report(const Buffers& b, const std::string& what, int grid, float us) {
  const cudaError_t error = cudaGetLastError();
  std::printf("%-44s grid %5d  %8.1f us  %6.0f GB/s%s%s\n", what.c_str(), grid,
              us, b.bytes / (us * 1e3), error == cudaSuccess ? "" : "  ",
              error == cudaSuccess ? "" : cudaGetErrorString(error));
}

template <int kRows, int kStageBytes, int kStages, int kThreads>
void TimeRing(const Buffers& b, int ranks) {
  auto* kernel = &RingReadKernel<kRows, kStageBytes, kStages, kThreads>;
  constexpr int kSmem = kRows * kStageBytes * kStages;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kSmem);
  const int grid = (b.rows + kRows - 1) / kRows * ranks;
  const float us = BestUs(b, [&] {
    kernel<<<grid, kThreads, kSmem>>>(b.matrix, b.row_bytes, b.rows, ranks,
                                      b.sink);
  });
  char what[96];
  std::snprintf(what, sizeof(what), "ring %3d rows x %4d B, %d stages, K/%d",
                kRows, kStageBytes, kStages, ranks);
  Report(b, what, grid, us);
}

int ParseInt(const char* arg, const char* name, int fallback) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) == 0 && arg[n] == '=')
    return std::atoi(arg + n + 1);
  return fallback;
}

bool Setup(int argc, char** argv, Buffers* b) {
  int device = 0;
  b->rows = 2784;
  b->row_bytes = 12288;
  for (int i = 1; i < argc; ++i) {
    b->rows = ParseInt(argv[i], "--rows", b->rows);
    b->row_bytes = ParseInt(argv[i], "--row_bytes", b->row_bytes);
    device = ParseInt(argv[i], "--device", device);
  }
  if (b->rows <= 0 || b->row_bytes <= 0 || b->row_bytes % 4096 != 0) {
    std::fprintf(stderr,
                 "--rows must be > 0 and --row_bytes a positive multiple of "
                 "4096; got %d and %d\n",
                 b->rows, b->row_bytes);
    return false;
  }
  b->bytes = static_cast<size_t>(b->rows) * b->row_bytes;
  cudaSetDevice(device);
  cudaDeviceGetAttribute(&b->sm_count, cudaDevAttrMultiProcessorCount, device);
  if (cudaMalloc(&b->matrix, b->bytes) != cudaSuccess ||
      cudaMalloc(&b->flush, b->flush_bytes) != cudaSuccess ||
      cudaMalloc(&b->sink, sizeof(unsigned)) != cudaSuccess) {
    std::fprintf(stderr, "cannot allocate %zu + %zu bytes on device %d\n",
                 b->bytes, b->flush_bytes, device);
    return false;
  }
  cudaMemset(b->matrix, 1, b->bytes);
  cudaMemset(b->flush, 2, b->flush_bytes);
  return true;
}

int Main(int argc, char** argv) {
  Buffers b;
  if (!Setup(argc, argv, &b)) return 2;
  std::printf("%d rows x %d B = %.1f MB, %d SMs\n", b.rows, b.row_bytes,
              b.bytes / 1e6, b.sm_count);
  Report(b, "streaming read (the bandwidth probe's kernel)", b.sm_count,
         BestUs(b, [&] {
           LaunchReadSweep(b.matrix, b.bytes, b.sink, b.sm_count, nullptr);
         }));
  TimeRing<128, 128, 5, 256>(b, 8);  // the wgmma GEMV's stages
  TimeRing<64, 128, 8, 128>(b, 8);
  TimeRing<64, 256, 5, 128>(b, 8);
  TimeRing<64, 512, 4, 128>(b, 8);
  TimeRing<32, 1024, 4, 128>(b, 8);
  TimeRing<16, 2048, 4, 128>(b, 8);
  TimeRing<32, 512, 5, 128>(b, 16);
  TimeRing<8, 4096, 4, 128>(b, 1);  // whole rows a block, no K split
  return 0;
}

}  // namespace
}  // namespace moetune::gpu

int main(int argc, char** argv) { return moetune::gpu::Main(argc, argv); }
