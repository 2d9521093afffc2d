// LaunchAbsorbQuery (gemv.cuh): W_UK of this rank's heads absorbed into the
// attention's queries, from BF16 or NVFP4 kv_b.
#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/gemv.cuh"
#include "kernels/cuda/step/gemv_rows.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

using gemv_detail::Unpack4;

constexpr int kAbsorbColumns = 32, kAbsorbGroups = 8;
// From this batch a block absorbs several sequences' queries (a warp a
// sequence in its last sum, so at most kAbsorbGroups).
constexpr int kAbsorbSharedFromBatch = 8, kAbsorbSequencesPerBlock = 8;
static_assert(kAbsorbSequencesPerBlock <= kAbsorbGroups);

// E2M1(code) * E4M3(block scale) of element (row, col) of a row-major NVFP4
// matrix with k columns (the tensor scale left to the caller).
__device__ __forceinline__ float Nvfp4Unscaled(const uint8_t* codes,
                                               const uint8_t* scales, int64_t k,
                                               int64_t row, int64_t col) {
  const uint32_t byte = __ldg(codes + row * (k / 2) + col / 2);
  const uint32_t code = (col & 1) ? (byte >> 4) : (byte & 0xfu);
  const uint32_t scale = __ldg(scales + row * (k / 16) + col / 16);
  return nvfp4::E2M1ToFloat(code) * nvfp4::E4M3ToFloat(scale);
}

template <int kSeq>
__global__ void AbsorbQueryKernel(AbsorbQuery a) {
  EnterAfterPriorKernels();
  __shared__ float partial[kAbsorbGroups][kSeq][kAbsorbColumns + 1];
  const int h = blockIdx.x, b0 = blockIdx.y * kSeq;
  const int seqs = kSeq == 1 ? 1 : min(kSeq, a.batch - b0);
  const int col = threadIdx.x % kAbsorbColumns;
  const int group = threadIdx.x / kAbsorbColumns;
  const int j = blockIdx.z * kAbsorbColumns + col;
  const float* q = a.q + b0 * a.q_stride + h * a.q_head_stride;
  const int64_t first_row = static_cast<int64_t>(h) * (a.nope + a.v_dim);
  float acc[kSeq] = {};
  if (j < a.kv_lora && a.codes == nullptr) {
    const uint16_t* w = a.kv_b + first_row * a.kv_lora + j;
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const float wi = Bf16ToFloat(w[static_cast<int64_t>(i) * a.kv_lora]);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        if (s < seqs) acc[s] += q[s * a.q_stride + i] * wi;
      }
    }
  } else if (j < a.kv_lora) {
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const float wi =
          Nvfp4Unscaled(a.codes, a.scales, a.kv_lora, first_row + i, j);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        if (s < seqs) acc[s] += q[s * a.q_stride + i] * wi;
      }
    }
#pragma unroll
    for (int s = 0; s < kSeq; ++s) acc[s] *= a.tensor_scale;
  }
#pragma unroll
  for (int s = 0; s < kSeq; ++s) partial[group][s][col] = acc[s];
  __syncthreads();
  const int s = group;
  if (s >= seqs || j >= a.kv_lora) return;
  float sum = 0.0f;
  for (int g = 0; g < kAbsorbGroups; ++g) sum += partial[g][s][col];
  a.q_lat[(static_cast<int64_t>(b0 + s) * a.heads + h) * a.kv_lora + j] = sum;
}

// From kAbsorbSharedFromBatch sequences with BF16 weights: a thread four
// adjacent columns (one 8-byte load of W_UK a row), so that each query
// value read serves four products, the block's queries staged in shared
// memory once (AbsorbQueryKernel loads a weight and eight query floats for
// eight products; this: -0.3 to -1.2 % of the step at 8-32 sequences,
// where the absorption runs beside the indexer and must end before its top-k).
// Each output is the same sums in the same order as AbsorbQueryKernel's (rows
// group, group + 8, ..., then the groups in order): the same bits.
constexpr int kAbsorbQuadColumns = 4 * kAbsorbColumns;  // a block's
constexpr int kAbsorbMaxNope = 256;
__global__ void __launch_bounds__(kAbsorbColumns* kAbsorbGroups)
    AbsorbQueryQuadKernel(AbsorbQuery a) {
  constexpr int kSeq = kAbsorbSequencesPerBlock;
  __shared__ float qs[kSeq][kAbsorbMaxNope];
  __shared__ float partial[kAbsorbGroups][kSeq][kAbsorbQuadColumns + 4];
  const int h = blockIdx.x, b0 = blockIdx.y * kSeq;
  const int seqs = min(kSeq, a.batch - b0);
  const int lane = threadIdx.x % kAbsorbColumns;
  const int group = threadIdx.x / kAbsorbColumns;
  const int j0 = blockIdx.z * kAbsorbQuadColumns + 4 * lane;
  EnterAfterPriorKernels();
  for (int t = threadIdx.x; t < kSeq * a.nope; t += blockDim.x) {
    const int s = t / a.nope, i = t % a.nope;
    qs[s][i] =
        s < seqs ? a.q[(b0 + s) * a.q_stride + h * a.q_head_stride + i] : 0.0f;
  }
  __syncthreads();
  float acc[kSeq][4] = {};
  if (j0 < a.kv_lora) {
    const uint16_t* w =
        a.kv_b + static_cast<int64_t>(h) * (a.nope + a.v_dim) * a.kv_lora + j0;
#pragma unroll 4
    for (int i = group; i < a.nope; i += kAbsorbGroups) {
      const uint2 packed = __ldg(reinterpret_cast<const uint2*>(
          w + static_cast<int64_t>(i) * a.kv_lora));
      float wf[4];
      Unpack4(packed, wf);
#pragma unroll
      for (int s = 0; s < kSeq; ++s) {
        const float qv = qs[s][i];
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[s][c] += qv * wf[c];
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSeq; ++s) {
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[group][s][4 * lane + c] = acc[s][c];
  }
  __syncthreads();
  const int s = threadIdx.x / kAbsorbColumns;  // a warp a sequence
  if (s >= seqs || j0 >= a.kv_lora) return;
  float sum[4] = {};
  for (int g = 0; g < kAbsorbGroups; ++g) {
#pragma unroll
    for (int c = 0; c < 4; ++c) sum[c] += partial[g][s][4 * lane + c];
  }
  float* out =
      a.q_lat + (static_cast<int64_t>(b0 + s) * a.heads + h) * a.kv_lora + j0;
#pragma unroll
  for (int c = 0; c < 4; ++c) out[c] = sum[c];
}

// Whether AbsorbQueryQuadKernel takes a: BF16 weights whose rows' 8-byte
// runs are aligned, a nope its staged queries hold.
bool AbsorbQuadTakes(const AbsorbQuery& a) {
  return a.codes == nullptr && a.batch >= kAbsorbSharedFromBatch &&
         a.kv_lora % 4 == 0 && a.nope <= kAbsorbMaxNope &&
         reinterpret_cast<uintptr_t>(a.kv_b) % 8 == 0;
}

}  // namespace

GpuStatus LaunchAbsorbQuery(const AbsorbQuery& a, cudaStream_t stream,
                            const LaunchPolicy& policy) {
  const int column_blocks = (a.kv_lora + kAbsorbColumns - 1) / kAbsorbColumns;
  const int threads = kAbsorbColumns * kAbsorbGroups;
  if (a.batch < kAbsorbSharedFromBatch) {
    return LaunchOverlapped(AbsorbQueryKernel<1>,
                            dim3(a.heads, a.batch, column_blocks), threads, 0,
                            stream, policy, a);
  }
  constexpr int kSeq = kAbsorbSequencesPerBlock;
  if (AbsorbQuadTakes(a)) {
    const int quad_blocks =
        (a.kv_lora + kAbsorbQuadColumns - 1) / kAbsorbQuadColumns;
    return LaunchOverlapped(
        AbsorbQueryQuadKernel,
        dim3(a.heads, (a.batch + kSeq - 1) / kSeq, quad_blocks), threads, 0,
        stream, policy, a);
  }
  return LaunchOverlapped(
      AbsorbQueryKernel<kSeq>,
      dim3(a.heads, (a.batch + kSeq - 1) / kSeq, column_blocks), threads, 0,
      stream, policy, a);
}

}  // namespace moetune::gpu
