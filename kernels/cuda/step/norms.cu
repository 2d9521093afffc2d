// LaunchAddRmsNorm and LaunchRowNorms (step_ops.cuh): RMSNorm of the
// residual stream and the latent and indexer rows' norms, a block a row.
#include <string>

#include "kernels/cuda/step/ops_parts.cuh"
#include "kernels/cuda/step/reduce.cuh"

namespace moetune::gpu {
namespace {

// RmsNormKernel's block; rows of up to kNormThreads * kNormPerThread.
constexpr int kNormThreads = 1024, kNormPerThread = 8;

// This thread's elements of a norm's gamma (or beta). A weight, which no
// kernel writes: the norm kernels load it before they wait for the kernels
// before them, so that only the row's own loads follow the wait.
__device__ void LoadGamma(const float* gamma, int n,
                          float (&g)[kNormPerThread]) {
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    g[j] = i < n ? gamma[i] : 0.0f;
  }
}

// One block a row, g from LoadGamma; with `add`, the row is first added to
// (in place). A thread loads all its elements of the row and of `add`
// before it stores anything: one trip to memory instead of one an element
// (the stores might alias the loads, so the compiler would otherwise keep
// each load behind the store before it: 6-7 us a norm at 6144 wide).
__device__ void RmsNormRow(float* x, int64_t x_stride, const float* add,
                           const float (&g)[kNormPerThread], int n, float eps,
                           const NormOut& out, int r) {
  __shared__ float scratch[32];
  float* row = x + r * x_stride;
  const float* added =
      add != nullptr ? add + static_cast<int64_t>(r) * n : nullptr;
  float v[kNormPerThread];
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    v[j] = i < n ? row[i] : 0.0f;
    if (add != nullptr && i < n) v[j] += added[i];
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    sum += v[j] * v[j];
    const int i = threadIdx.x + j * kNormThreads;
    if (add != nullptr && i < n) row[i] = v[j];
  }
  const float inv = rsqrtf(BlockSum(sum, scratch) / n + eps);
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    if (i >= n) break;
    const float y = v[j] * inv * g[j];
    if (out.out != nullptr) out.out[r * out.stride + i] = y;
    const int64_t at = static_cast<int64_t>(r) * n + i;
    if (out.bf16 != nullptr) out.bf16[at] = FloatToBf16(y);
    if (out.bf16_float != nullptr) {
      out.bf16_float[at] = Bf16ToFloat(FloatToBf16(y));
    }
  }
  if (out.rope_offset < 0) return;
  float* rotated = out.out + r * out.stride + out.rope_offset;
  for (int i = threadIdx.x; i < out.rope.pairs; i += blockDim.x) {
    RotatePair(rotated, i, out.rope);
  }
}

__global__ void RmsNormKernel(float* x, int64_t x_stride, const float* add,
                              const float* gamma, int n, float eps,
                              NormOut out) {
  float g[kNormPerThread];
  LoadGamma(gamma, n, g);
  EnterAfterPriorKernels();
  RmsNormRow(x, x_stride, add, g, n, eps, out, blockIdx.x);
}

// LayerNorm and RoPE of row r of k, by one block; g and be (gamma and
// beta) from LoadGamma. The row is loaded once into registers; the sums
// are the same as two passes over memory would give.
__device__ void LayerNormRopeRow(float* k, int dim,
                                 const float (&g)[kNormPerThread],
                                 const float (&be)[kNormPerThread], float eps,
                                 const RopeTable& rope, int r) {
  __shared__ float scratch[32];
  float* row = k + static_cast<int64_t>(r) * dim;
  float v[kNormPerThread];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    v[j] = i < dim ? row[i] : 0.0f;
    sum += v[j];
  }
  const float mean = BlockSum(sum, scratch) / dim;
  float var = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    if (threadIdx.x + j * kNormThreads < dim) {
      var += (v[j] - mean) * (v[j] - mean);
    }
  }
  const float inv = rsqrtf(BlockSum(var, scratch) / dim + eps);
#pragma unroll
  for (int j = 0; j < kNormPerThread; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    if (i < dim) row[i] = (v[j] - mean) * inv * g[j] + be[j];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rope.pairs; i += blockDim.x) {
    RotatePair(row, i, rope);
  }
}

// Block (job, sequence).
__global__ void RowNormsKernel(RowNorms norms) {
  const RowNorm& j = norms.job[blockIdx.x];
  float g[kNormPerThread], be[kNormPerThread] = {};
  LoadGamma(j.gamma, j.n, g);
  if (j.layer_norm) LoadGamma(j.beta, j.n, be);
  EnterAfterPriorKernels();
  if (j.layer_norm) {
    LayerNormRopeRow(j.x, j.n, g, be, j.eps, j.out.rope, blockIdx.y);
  } else {
    RmsNormRow(j.x, j.x_stride, nullptr, g, j.n, j.eps, j.out, blockIdx.y);
  }
}

GpuStatus CheckNormWidth(int n) {
  if (n <= kNormThreads * kNormPerThread) return OkStatus();
  return Fail(RunStatus::kCannotImplement,
              "RMSNorm holds a row in registers: at most " +
                  std::to_string(kNormThreads * kNormPerThread) +
                  " values, got " + std::to_string(n));
}

}  // namespace

GpuStatus LaunchAddRmsNorm(float* h, const float* add, const float* gamma,
                           int n, float eps, int batch, const NormOut& out,
                           cudaStream_t stream, const LaunchPolicy& policy) {
  MG_RETURN_IF_ERROR(CheckNormWidth(n));
  return LaunchOverlapped(RmsNormKernel, batch, kNormThreads, 0, stream, policy,
                          h, n, add, gamma, n, eps, out);
}

GpuStatus LaunchRowNorms(const RowNorms& norms, int batch, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  if (norms.jobs < 1 || norms.jobs > RowNorms::kMaxJobs) {
    return Fail(RunStatus::kBadProblem,
                "RowNorms.jobs: 1 to " + std::to_string(RowNorms::kMaxJobs) +
                    ", got " + std::to_string(norms.jobs));
  }
  for (int j = 0; j < norms.jobs; ++j)
    MG_RETURN_IF_ERROR(CheckNormWidth(norms.job[j].n));
  // One block a row: wide, so that a row of 6144 is a few loads a thread.
  return LaunchOverlapped(RowNormsKernel, dim3(norms.jobs, batch), kNormThreads,
                          0, stream, policy, norms);
}

}  // namespace moetune::gpu
