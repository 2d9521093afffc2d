// moetune-read-bench: what one kernel launch can read, nothing computed --
// the bound under the step's GEMVs (kernels/cuda/step/PERF.md). A matrix
// of `rows` rows of `row_bytes` (default the input projections' 2784 x
// 12288 B, 34 MB) is read once by a grid of cp.async rings in several
// shapes (rows a block, contiguous bytes a row a stage, stages, K split
// over blocks), and by the bandwidth probe's streaming kernel; L2 flushed
// before each launch (a 192 MB read), CUDA events around the launch, the
// best of 5 after 2 warm-ups.
//
// Then chains: one CUDA graph of n such kernels in a row, each reading its
// own slice of a 512 MB buffer (nothing from L2), launched as the step's
// kernels are (each may start while the one before runs and waits for it
// before reading: programmatic dependent launch) and plainly: what a kernel
// costs in a graph beyond its bytes -- the chain's bound under a step of
// ~1250 kernels; and the same reads as the phases of one resident launch,
// a grid barrier between phases: what a persistent kernel's link costs.
// Last, links that depend on the one before (an activation passed on) with
// their weights' first stages issued before the wait or after it, from 0.1
// to 17 MB on 1, ~132 and ~264 blocks: what a link costs above its bytes
// once its weights are in flight ahead of its dependency; also links that
// read only the activation, and links whose blocks leave no room on their
// SM for the next link's.
//
//   moetune-read-bench [--rows=2784] [--row_bytes=12288] [--device=D]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/base/tensor_map.cuh"
#include "kernels/cuda/experts/expert_mma/expert_mma.cuh"

namespace moetune::gpu {
namespace {

using mma_detail::CpAsync16;
using mma_detail::CpAsyncCommit;
using mma_detail::CpAsyncWait;
using mma_detail::GridDependencyWait;
using mma_detail::LaunchDependents;
using mma_detail::MbarArriveExpectTx;
using mma_detail::MbarInit;
using mma_detail::MbarWait;
using mma_detail::TensorCopy3d;

// A block's read: kRows rows x its rank's share of each row, kStageBytes of
// a row a stage through a ring of kStages in `smem`; consecutive threads
// copy consecutive 16 bytes of a row. RingPrologue issues the first
// kStages - 1 stages (what may be in flight before the block waits for
// anything), RingDrain waits for each stage in turn and issues the rest;
// it returns the sum of each stage's first word as this thread saw it (so
// that nothing is elided), and every copy has landed when it returns.
template <int kRows, int kStageBytes, int kStages, int kThreads>
struct Ring {
  static constexpr int kBytes = kRows * kStageBytes;
  static constexpr int kPieces = kBytes / 16 / kThreads;
  const uint8_t* w;
  int row_bytes, rows, r0, first, count;
  uint8_t* smem;

  __device__ Ring(const uint8_t* w_in, int row_bytes_in, int rows_in, int ranks,
                  uint8_t* smem_in)
      : w(w_in), row_bytes(row_bytes_in), rows(rows_in), smem(smem_in) {
    const int rank = blockIdx.x % ranks;
    r0 = (blockIdx.x / ranks) * kRows;
    const int stages = row_bytes / kStageBytes;
    first = rank * stages / ranks;
    count = r0 < rows ? (rank + 1) * stages / ranks - first : 0;
  }

  __device__ void Issue(int i) const {
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
  }

  __device__ void Prologue() const {
    for (int i = 0; i < kStages - 1; ++i) {
      if (i < count) Issue(i);
      CpAsyncCommit();
    }
  }

  __device__ unsigned Drain() const {
    unsigned acc = 0;
    for (int i = 0; i < count; ++i) {
      CpAsyncWait<kStages - 2>();
      __syncthreads();
      acc += *reinterpret_cast<const unsigned*>(smem + (i % kStages) * kBytes +
                                                threadIdx.x * 16);
      if (i + kStages - 1 < count) Issue(i + kStages - 1);
      CpAsyncCommit();
    }
    return acc;
  }
};

template <int kRows, int kStageBytes, int kStages, int kThreads>
__device__ unsigned RingRead(const uint8_t* w, int row_bytes, int rows,
                             int ranks, uint8_t* smem) {
  const Ring<kRows, kStageBytes, kStages, kThreads> ring(w, row_bytes, rows,
                                                         ranks, smem);
  ring.Prologue();
  return ring.Drain();
}

// RingRead as one kernel. Launched as a dependent, it lets the next
// kernel's blocks in at once and waits for its predecessor before reading.
template <int kRows, int kStageBytes, int kStages, int kThreads>
__global__ void __launch_bounds__(kThreads)
    RingReadKernel(const uint8_t* w, int row_bytes, int rows, int ranks,
                   unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  GridDependencyWait();
  LaunchDependents();
  const unsigned acc = RingRead<kRows, kStageBytes, kStages, kThreads>(
      w, row_bytes, rows, ranks, smem);
  if (acc == 0x9e3779b9u) *sink = acc;
}

// A link of a chain that depends on the one before: it reads its own
// weights (a slice no kernel writes) and the activation the link before
// wrote (*act_in), and writes the next one's (*act_out). kAhead: the
// weights' first stages are issued before griddepcontrol.wait, so they are
// in flight while the link before finishes; else after it, as the step's
// kernels load today.
template <int kRows, int kStageBytes, int kStages, int kThreads, bool kAhead>
__global__ void __launch_bounds__(kThreads)
    LinkKernel(const uint8_t* w, int row_bytes, int rows, int ranks,
               unsigned* sink, const unsigned* act_in, unsigned* act_out) {
  extern __shared__ __align__(128) uint8_t smem[];
  const Ring<kRows, kStageBytes, kStages, kThreads> ring(w, row_bytes, rows,
                                                         ranks, smem);
  if constexpr (kAhead) ring.Prologue();
  GridDependencyWait();
  const unsigned activation =
      *reinterpret_cast<const volatile unsigned*>(act_in);
  LaunchDependents();
  if constexpr (!kAhead) ring.Prologue();
  const unsigned acc = ring.Drain() + activation;
  if (blockIdx.x == 0 && threadIdx.x == 0) *act_out = activation + 1;
  if (acc == 0x9e3779b9u) *sink = acc;
}

// Polls *word (acquire) until it reaches target.
__device__ __forceinline__ void WaitUntilAtLeast(const unsigned* word,
                                                 unsigned target) {
  unsigned seen = 0;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n"
                 : "=r"(seen)
                 : "l"(word)
                 : "memory");
  } while (seen < target);
}

// Every block of the grid past this point before any goes on: thread 0 of
// each adds itself to *arrived (release) and waits (acquire) until `target`
// have; the grid must be resident at once. The link between the phases of
// a persistent kernel, against the next kernel's launch in a chain.
__device__ void GridBarrier(unsigned* arrived, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(arrived)
                 : "memory");
    WaitUntilAtLeast(arrived, target);
  }
  __syncthreads();
}

// GridBarrier with the waiting apart from the counting: the block that
// arrives last (its add returns target - 1) publishes `target` in *go
// (release), and the others poll *go (acquire) rather than the counter
// every block adds to.
__device__ void GridBarrierFlag(unsigned* arrived, unsigned* go,
                                unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned before = 0;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
                 : "=r"(before)
                 : "l"(arrived)
                 : "memory");
    if (before + 1 == target) {
      asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(go),
                   "r"(target)
                   : "memory");
    } else {
      WaitUntilAtLeast(go, target);
    }
  }
  __syncthreads();
}

// The chain's n kernels as the phases of one launch: phase p reads slice p
// (rows rows of row_bytes from w + p * phase_bytes) as RingReadKernel
// would, then the grid meets at a barrier (GridBarrier, or with `go`
// GridBarrierFlag). *arrived counts on across launches from `base`. With
// `ahead` the next phase's first stages are issued before the barrier, so
// they are in flight while the grid meets.
template <int kRows, int kStageBytes, int kStages, int kThreads>
__global__ void __launch_bounds__(kThreads)
    PhasedRingReadKernel(const uint8_t* w, int64_t phase_bytes, int phases,
                         int row_bytes, int rows, int ranks, unsigned* sink,
                         unsigned* arrived, unsigned base, unsigned* go,
                         bool ahead) {
  extern __shared__ __align__(128) uint8_t smem[];
  using PhaseRing = Ring<kRows, kStageBytes, kStages, kThreads>;
  unsigned acc = 0;
  for (int p = 0; p < phases; ++p) {
    const PhaseRing ring(w + p * phase_bytes, row_bytes, rows, ranks, smem);
    if (!ahead || p == 0) ring.Prologue();
    acc += ring.Drain();
    if (ahead && p + 1 < phases) {
      __syncthreads();  // every thread done with the ring's last stage
      PhaseRing(w + (p + 1) * phase_bytes, row_bytes, rows, ranks, smem)
          .Prologue();
    }
    const unsigned target = base + (p + 1) * gridDim.x;
    if (go == nullptr) {
      GridBarrier(arrived, target);
    } else {
      GridBarrierFlag(arrived, go, target);
    }
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

// As RingReadKernel through TMA tensor copies (the wgmma GEMV's first
// weights path): thread 0 issues one box of 64 BF16 K x kBoxRows rows (128-
// byte swizzle) a stage into a ring of kStages on the stage's mbarrier; the
// block waits for each and frees its slot.
template <int kBoxRows, int kStages>
__global__ void __launch_bounds__(128)
    TmaRingReadKernel(const __grid_constant__ CUtensorMap map, int row_elems,
                      int ranks, unsigned* sink) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  constexpr int kBytes = kBoxRows * 128;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kBytes);
  const int rank = blockIdx.x % ranks, r0 = (blockIdx.x / ranks) * kBoxRows;
  const int stages = row_elems / 64;
  const int first = rank * stages / ranks;
  const int count = (rank + 1) * stages / ranks - first;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) MbarInit(full + i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const auto issue = [&](int i) {
    MbarArriveExpectTx(full + i % kStages, kBytes);
    TensorCopy3d(smem + (i % kStages) * kBytes, &map, (first + i) * 64, r0, 0,
                 full + i % kStages);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages && i < count; ++i) issue(i);
  }
  unsigned acc = 0;
  for (int i = 0; i < count; ++i) {
    MbarWait(full + i % kStages, (i / kStages) & 1);
    acc += *reinterpret_cast<const unsigned*>(smem + (i % kStages) * kBytes +
                                              threadIdx.x * 16);
    __syncthreads();  // the slot read by all
    if (threadIdx.x == 0 && i + kStages < count) issue(i + kStages);
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

struct Buffers {
  uint8_t* matrix = nullptr;
  uint8_t* flush = nullptr;
  unsigned* sink = nullptr;
  size_t bytes = 0, flush_bytes = size_t{192} << 20;
  int rows = 0, row_bytes = 0, sm_count = 0;
  // The rate a link's bytes are timed at: a streaming read of the chains'
  // 512 MB (a read of the 34 MB matrix is short enough for its launch to
  // show, and reads low).
  double read_gbps = 0;
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

template <int kBoxRows, int kStages>
void TimeTmaRing(const Buffers& b, int ranks) {
  auto* kernel = &TmaRingReadKernel<kBoxRows, kStages>;
  constexpr int kSmem = kBoxRows * 128 * kStages + 1024 + 8 * kStages;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kSmem);
  RowsMap m;
  m.base = b.matrix;
  m.k = m.row_stride = b.row_bytes / 2;
  m.rows_per_group = b.rows;
  m.box_rows = kBoxRows;
  m.swizzle_128 = true;
  CUtensorMap map;
  const GpuStatus status = EncodeRowsMap(m, &map);
  if (!status.ok()) {
    std::printf("tma ring: %s\n", status.message.c_str());
    return;
  }
  const int grid = (b.rows + kBoxRows - 1) / kBoxRows * ranks;
  const float us = BestUs(b, [&] {
    kernel<<<grid, 128, kSmem>>>(map, b.row_bytes / 2, ranks, b.sink);
  });
  char what[96];
  std::snprintf(what, sizeof(what),
                "tma ring %3d rows x 128 B, %d stages, K/%d", kBoxRows, kStages,
                ranks);
  Report(b, what, grid, us);
}

// The input projections' row (2784 rows of it by default): the default
// --row_bytes and the chains' row length.
constexpr int kProjectionRowBytes = 12288;

// A CUDA graph of n launches of `kernel` (grid blocks of kThreads, kSmem
// bytes of shared memory), dependent or plain; launch(config, i) enqueues
// the i-th with its arguments.
template <typename Kernel, typename Launch>
cudaGraphExec_t CaptureChain(Kernel* kernel, int threads, int smem, int grid,
                             int n, bool dependent, Launch launch) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       smem);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = dependent ? 1 : 0;
  for (int i = 0; i < n; ++i) launch(config, i);
  cudaGraph_t graph;
  cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return exec;
}

// A CUDA graph of n ring kernels of kRows-row blocks, each reading
// rows_each rows of kProjectionRowBytes from its own slice of `chain` (so no
// kernel reads what another left in L2); dependent: as the step launches.
template <int kRows, int kStageBytes, int kStages, int kThreads>
cudaGraphExec_t ChainGraph(const Buffers& b, const uint8_t* chain, int n,
                           int rows_each, int ranks, int grid, bool dependent) {
  auto* kernel = &RingReadKernel<kRows, kStageBytes, kStages, kThreads>;
  return CaptureChain(
      kernel, kThreads, kRows * kStageBytes * kStages, grid, n, dependent,
      [&](const cudaLaunchConfig_t& config, int i) {
        cudaLaunchKernelEx(
            &config, kernel,
            chain + static_cast<int64_t>(i) * rows_each * kProjectionRowBytes,
            kProjectionRowBytes, rows_each, ranks, b.sink);
      });
}

// The grid of a chain's kernel (at least one block: a chain that reads
// nothing is the link alone).
template <int kRows>
int ChainGrid(int rows_each, int ranks, int at_least) {
  return std::max(at_least, (rows_each + kRows - 1) / kRows * ranks);
}

// Whether `blocks` blocks of kernel fit the GPU at once (a grid barrier
// needs them all resident).
template <typename Kernel>
bool Resident(const Buffers& b, Kernel* kernel, int threads, int smem,
              int blocks) {
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
  return int64_t{per_sm} * b.sm_count >= blocks;
}

void PrintChain(const char* how, int n, double bytes_each, int grid, float us) {
  const cudaError_t error = cudaGetLastError();
  std::printf(
      "chain %3d x %6.2f MB, grid %4d, %-9s %8.1f us  %6.2f us a link  "
      "%6.0f GB/s%s%s\n",
      n, bytes_each / 1e6, grid, how, us, us / n,
      bytes_each > 0 ? n * bytes_each / (us * 1e3) : 0.0,
      error == cudaSuccess ? "" : "  ",
      error == cudaSuccess ? "" : cudaGetErrorString(error));
}

// n reads of rows_each x kProjectionRowBytes, each its own slice: as n
// kernels in one graph (dependent, as the step launches them, and plain),
// and as the n phases of one resident launch with a grid barrier between
// them (a persistent kernel's links); the time and a link's share of it.
template <int kRows, int kStageBytes, int kStages, int kThreads>
void TimeChain(const Buffers& b, const uint8_t* chain, int n, int rows_each,
               int ranks, int at_least = 1) {
  const double bytes_each =
      static_cast<double>(rows_each) * kProjectionRowBytes;
  const int grid = ChainGrid<kRows>(rows_each, ranks, at_least);
  for (const bool dependent : {true, false}) {
    cudaGraphExec_t exec = ChainGraph<kRows, kStageBytes, kStages, kThreads>(
        b, chain, n, rows_each, ranks, grid, dependent);
    const float us = BestUs(b, [&] { cudaGraphLaunch(exec, nullptr); });
    PrintChain(dependent ? "dependent" : "plain", n, bytes_each, grid, us);
    cudaGraphExecDestroy(exec);
  }
  auto* phased = &PhasedRingReadKernel<kRows, kStageBytes, kStages, kThreads>;
  constexpr int kSmem = kRows * kStageBytes * kStages;
  cudaFuncSetAttribute(phased, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kSmem);
  if (!Resident(b, phased, kThreads, kSmem, grid)) {
    std::printf("chain %3d x %6.2f MB, grid %4d, barriers: not resident\n", n,
                bytes_each / 1e6, grid);
    return;
  }
  unsigned* counters = nullptr;  // arrived, go
  cudaMalloc(&counters, 2 * sizeof(unsigned));
  for (const bool flag : {false, true}) {
    cudaMemset(counters, 0, 2 * sizeof(unsigned));
    unsigned base = 0;
    const float us = BestUs(b, [&] {
      phased<<<grid, kThreads, kSmem>>>(
          chain, static_cast<int64_t>(rows_each) * kProjectionRowBytes, n,
          kProjectionRowBytes, rows_each, ranks, b.sink, counters, base,
          flag ? counters + 1 : nullptr, false);
      base += static_cast<unsigned>(n * grid);
    });
    PrintChain(flag ? "flag" : "barriers", n, bytes_each, grid, us);
  }
  cudaFree(counters);
}

// A CUDA graph of n dependent LinkKernels, link i reading slice i of
// `chain` and activation i of `act`, writing activation i + 1. Each block
// holds at least hold_smem bytes of shared memory (its ring's if more):
// enough, and a link's blocks cannot sit beside the link before's on an SM.
template <int kRows, int kStageBytes, int kStages, int kThreads, bool kAhead>
cudaGraphExec_t LinkGraph(const Buffers& b, const uint8_t* chain, unsigned* act,
                          int n, int rows_each, int ranks, int grid,
                          int hold_smem) {
  auto* kernel = &LinkKernel<kRows, kStageBytes, kStages, kThreads, kAhead>;
  return CaptureChain(
      kernel, kThreads, std::max(kRows * kStageBytes * kStages, hold_smem),
      grid, n, true, [&](const cudaLaunchConfig_t& config, int i) {
        cudaLaunchKernelEx(
            &config, kernel,
            chain + static_cast<int64_t>(i) * rows_each * kProjectionRowBytes,
            kProjectionRowBytes, rows_each, ranks, b.sink,
            static_cast<const unsigned*>(act + i), act + i + 1);
      });
}

// A link's time above its bytes at the streaming read's rate.
void PrintLink(const Buffers& b, const char* how, int n, double bytes_each,
               int grid, float us) {
  const cudaError_t error = cudaGetLastError();
  const double bytes_us = bytes_each / (b.read_gbps * 1e3);
  std::printf(
      "link %3d x %6.2f MB, grid %4d, %-16s %8.1f us  %6.2f us a link  "
      "%+6.2f us above its bytes%s%s\n",
      n, bytes_each / 1e6, grid, how, us, us / n, us / n - bytes_us,
      error == cudaSuccess ? "" : "  ",
      error == cudaSuccess ? "" : cudaGetErrorString(error));
}

// n dependent links of rows_each x kProjectionRowBytes (each its own slice,
// each reading the activation the one before wrote): their weights loaded
// after the wait (today's order) and issued before it, as dependent
// launches; and as the phases of one resident launch, the next phase's
// weights issued after or before the grid barrier. With hold_smem (no
// phases) each block holds that much shared memory, so that a link's blocks
// enter an SM only as the link before's leave it.
template <int kRows, int kStageBytes, int kStages, int kThreads>
void TimeLinks(const Buffers& b, const uint8_t* chain, unsigned* act, int n,
               int rows_each, int ranks, int at_least = 1, int hold_smem = 0) {
  const double bytes_each =
      static_cast<double>(rows_each) * kProjectionRowBytes;
  const int grid = ChainGrid<kRows>(rows_each, ranks, at_least);
  cudaGraphExec_t after =
      LinkGraph<kRows, kStageBytes, kStages, kThreads, false>(
          b, chain, act, n, rows_each, ranks, grid, hold_smem);
  cudaGraphExec_t before =
      LinkGraph<kRows, kStageBytes, kStages, kThreads, true>(
          b, chain, act, n, rows_each, ranks, grid, hold_smem);
  const bool held = hold_smem > 0;
  PrintLink(b, held ? "after, 1 an SM" : "wait, then read", n, bytes_each, grid,
            BestUs(b, [&] { cudaGraphLaunch(after, nullptr); }));
  PrintLink(b, held ? "ahead, 1 an SM" : "weights ahead", n, bytes_each, grid,
            BestUs(b, [&] { cudaGraphLaunch(before, nullptr); }));
  cudaGraphExecDestroy(after);
  cudaGraphExecDestroy(before);
  if (held) return;
  auto* phased = &PhasedRingReadKernel<kRows, kStageBytes, kStages, kThreads>;
  constexpr int kSmem = kRows * kStageBytes * kStages;
  cudaFuncSetAttribute(phased, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kSmem);
  if (!Resident(b, phased, kThreads, kSmem, grid)) return;
  unsigned* arrived = nullptr;
  cudaMalloc(&arrived, sizeof(unsigned));
  for (const bool ahead : {false, true}) {
    cudaMemset(arrived, 0, sizeof(unsigned));
    unsigned base = 0;
    const float us = BestUs(b, [&] {
      phased<<<grid, kThreads, kSmem>>>(
          chain, static_cast<int64_t>(rows_each) * kProjectionRowBytes, n,
          kProjectionRowBytes, rows_each, ranks, b.sink, arrived, base, nullptr,
          ahead);
      base += static_cast<unsigned>(n * grid);
    });
    PrintLink(b, ahead ? "phases, ahead" : "phases", n, bytes_each, grid, us);
  }
  cudaFree(arrived);
}

// The links from 0.1 to 17 MB on 1, ~132 and ~264 blocks: what a dependent
// step costs beyond its bytes when its weights are in flight before its
// sync, against when they are loaded after it. First the links that read
// nothing but the activation (a norm's, RoPE's or top-k's place in the
// chain); last, links whose blocks each hold 120 KB of shared memory (a
// wgmma GEMV's or a deep ring's), so that no block of the next link fits
// beside one of the link before on its SM.
void TimeLinksAhead(const Buffers& b, const uint8_t* chain) {
  unsigned* act = nullptr;
  if (cudaMalloc(&act, 65 * sizeof(unsigned)) != cudaSuccess) return;
  cudaMemset(act, 0, 65 * sizeof(unsigned));
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 0, 1);  // the activation only
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 0, 1, b.sm_count);
  TimeLinks<8, 4096, 4, 128>(b, chain, act, 64, 8, 1);  // 0.1 MB, 1
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 8, 1, b.sm_count);
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 44, 66);     // 0.54 MB
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 180, 22);    // 2.2 MB
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 180, 44);    //   264
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 352, 12);    // 4.3 MB
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 352, 24);    //   264
  TimeLinks<32, 512, 5, 128>(b, chain, act, 48, 704, 6);     // 8.7 MB
  TimeLinks<32, 512, 5, 128>(b, chain, act, 48, 704, 12);    //   264
  TimeLinks<128, 128, 5, 256>(b, chain, act, 24, 1408, 12);  // 17 MB
  TimeLinks<128, 128, 5, 256>(b, chain, act, 24, 1408, 24);  //   264
  constexpr int kHold = 120 << 10;  // two blocks an SM do not fit
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 180, 22, 1, kHold);  // 2.2
  TimeLinks<32, 512, 5, 128>(b, chain, act, 64, 352, 12, 1, kHold);  // 4.3
  TimeLinks<32, 512, 5, 128>(b, chain, act, 48, 704, 6, 1, kHold);   // 8.7
  TimeLinks<128, 128, 5, 256>(b, chain, act, 24, 1408, 12, 1, kHold);
  cudaFree(act);
}

// The chains: what a kernel costs beyond its bytes, from nothing read (the
// link alone, over one SM's block and over every SM's) to the input
// projections' 34 MB.
void TimeChains(const Buffers& b) {
  const size_t bytes = size_t{512} << 20;
  uint8_t* chain = nullptr;
  if (cudaMalloc(&chain, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cannot allocate the chains' %zu bytes\n", bytes);
    return;
  }
  cudaMemset(chain, 3, bytes);
  TimeChain<32, 512, 5, 128>(b, chain, 64, 0, 1);  // nothing, 1 block
  TimeChain<32, 512, 5, 128>(b, chain, 64, 0, 1, b.sm_count);
  TimeChain<32, 512, 5, 128>(b, chain, 64, 0, 1, 2 * b.sm_count);
  TimeChain<8, 4096, 4, 128>(b, chain, 64, 8, 1);      // 98 KB, 1 block
  TimeChain<32, 512, 5, 128>(b, chain, 64, 64, 16);    // 0.8 MB
  TimeChain<32, 512, 5, 128>(b, chain, 32, 256, 16);   // 3.1 MB
  TimeChain<128, 128, 5, 256>(b, chain, 16, 1024, 8);  // 12.6 MB
  TimeChain<128, 128, 5, 256>(b, chain, 8, 2784, 8);   // 34 MB
  Buffers links = b;
  const float streaming = BestUs(
      b, [&] { LaunchReadSweep(chain, bytes, b.sink, b.sm_count, nullptr); });
  links.read_gbps = bytes / (streaming * 1e3);
  std::printf("streaming read of %zu MB: %.0f GB/s (a link's bytes at it)\n",
              bytes >> 20, links.read_gbps);
  TimeLinksAhead(links, chain);
  cudaFree(chain);
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
  b->row_bytes = kProjectionRowBytes;
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
  const float streaming = BestUs(b, [&] {
    LaunchReadSweep(b.matrix, b.bytes, b.sink, b.sm_count, nullptr);
  });
  Report(b, "streaming read (the bandwidth probe's kernel)", b.sm_count,
         streaming);
  TimeRing<128, 128, 5, 256>(b, 8);  // the wgmma GEMV's stages
  TimeRing<64, 128, 8, 128>(b, 8);
  TimeRing<64, 256, 5, 128>(b, 8);
  TimeRing<64, 512, 4, 128>(b, 8);
  TimeRing<32, 1024, 4, 128>(b, 8);
  TimeRing<16, 2048, 4, 128>(b, 8);
  TimeRing<32, 512, 5, 128>(b, 16);
  TimeRing<8, 4096, 4, 128>(b, 1);  // whole rows a block, no K split
  TimeTmaRing<128, 6>(b, 5);        // one block an SM, as the GEMV's
  TimeTmaRing<128, 6>(b, 8);
  TimeTmaRing<128, 12>(b, 5);
  TimeTmaRing<64, 12>(b, 8);
  TimeTmaRing<256, 4>(b, 4);
  TimeChains(b);
  return 0;
}

}  // namespace
}  // namespace moetune::gpu

int main(int argc, char** argv) { return moetune::gpu::Main(argc, argv); }
