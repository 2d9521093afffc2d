#include <string>

#include "kernels/cuda/overlap_launch.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/cuda/step/step_ops.cuh"
#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>((n + threads - 1) / threads);
}

__global__ void EmbedKernel(const int* tokens, int hidden, uint64_t seed,
                            float scale, float* h) {
  EnterAfterPriorKernels();
  const int b = blockIdx.y;
  const uint64_t row = static_cast<uint64_t>(tokens[b]) * hidden;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden;
       i += gridDim.x * blockDim.x) {
    h[static_cast<int64_t>(b) * hidden + i] =
        weights::Bf16Weight(seed, 0, weights::kEmbedding, row + i, scale);
  }
}

__device__ void RotatePair(float* p, int i, const RopeTable& rope) {
  const double even = p[2 * i], odd = p[2 * i + 1];
  const double c = rope.cos[i], s = rope.sin[i];
  p[2 * i] = static_cast<float>(even * c - odd * s);
  p[2 * i + 1] = static_cast<float>(odd * c + even * s);
}

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

// Rows of a, then rows of b: a thread a pair.
__global__ void RopeKernel(RopeRows a, RopeRows b, RopeTable rope) {
  EnterAfterPriorKernels();
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t in_a = static_cast<int64_t>(a.rows) * rope.pairs;
  const RopeRows& r = i < in_a ? a : b;
  if (i >= in_a) i -= in_a;
  if (i >= static_cast<int64_t>(r.rows) * rope.pairs) return;
  const int64_t row = i / rope.pairs;
  RotatePair(r.x + row * r.stride + r.offset, static_cast<int>(i % rope.pairs),
             rope);
}

__global__ void AppendEntriesKernel(AppendEntries a) {
  EnterAfterPriorKernels();
  const int b = blockIdx.x;
  const int64_t row = static_cast<int64_t>(b) * a.stride + a.position;
  for (int i = threadIdx.x; i < a.latent_dim; i += blockDim.x) {
    a.latent[row * a.latent_dim + i] =
        FloatToBf16(a.latent_entry[b * a.latent_dim + i]);
  }
  for (int i = threadIdx.x; i < a.key_dim; i += blockDim.x) {
    a.keys[row * a.key_dim + i] = nvfp4::FloatToE4M3(a.key[b * a.key_dim + i]);
  }
}

// One block a sequence, warp w the latent groups w, w + 8, ...: the group's
// amax by shuffles, its scale, its values encoded; then the rope key and
// the indexer key by every thread.
__global__ void AppendFp8EntriesKernel(AppendEntries a) {
  EnterAfterPriorKernels();
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const kvfp8::RowLayout layout =
      kvfp8::RowLayoutOf(a.kv_lora, a.latent_dim - a.kv_lora);
  const int64_t row = static_cast<int64_t>(b) * a.stride + a.position;
  uint8_t* out = a.latent_fp8 + row * layout.bytes;
  const float* entry = a.latent_entry + static_cast<int64_t>(b) * a.latent_dim;
  const int groups = kvfp8::Groups(a.kv_lora);
  for (int g = warp; g < groups; g += blockDim.x / 32) {
    const int g0 = g * kvfp8::kGroupSize;
    const int end = min(a.kv_lora, g0 + kvfp8::kGroupSize);
    float amax = 0.0f;
    for (int d = g0 + lane; d < end; d += 32)
      amax = fmaxf(amax, fabsf(entry[d]));
    const float scale = kvfp8::GroupScale(WarpMax(amax));
    for (int d = g0 + lane; d < end; d += 32)
      out[d] = kvfp8::Encode(entry[d], scale);
    if (lane == 0) reinterpret_cast<float*>(out + layout.scales)[g] = scale;
  }
  uint16_t* rope = reinterpret_cast<uint16_t*>(out + layout.rope);
  for (int i = a.kv_lora + threadIdx.x; i < a.latent_dim; i += blockDim.x) {
    rope[i - a.kv_lora] = FloatToBf16(entry[i]);
  }
  for (int i = threadIdx.x; i < a.key_dim; i += blockDim.x) {
    a.keys[row * a.key_dim + i] = nvfp4::FloatToE4M3(a.key[b * a.key_dim + i]);
  }
}

__global__ void SiluMulKernel(const float* gu, int width, int batch,
                              float* act) {
  EnterAfterPriorKernels();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(width) * batch) return;
  const int64_t b = i / width, j = i % width;
  const float gate = gu[b * 2 * width + j], up = gu[b * 2 * width + width + j];
  act[i] = gate / (1.0f + expf(-gate)) * up;
}

constexpr int kArgMaxThreads = 1024, kArgMaxLoads = 8;

// One block a row: (value, index) maxima, the lower index on ties.
__global__ void ArgMaxKernel(const float* logits, int width, int first_token,
                             int* next) {
  EnterAfterPriorKernels();
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * width;
  float v = -INFINITY;
  int idx = width;
  // kArgMaxLoads loads in flight a thread (a loop of one load at a time
  // waited on memory for each: 26 us over a 19360-token slice).
  for (int base = threadIdx.x; base < width;
       base += kArgMaxLoads * blockDim.x) {
    float loaded[kArgMaxLoads];
#pragma unroll
    for (int u = 0; u < kArgMaxLoads; ++u) {
      const int i = base + u * blockDim.x;
      loaded[u] = i < width ? row[i] : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kArgMaxLoads; ++u) {
      if (loaded[u] > v) {  // ascending i per thread: the first maximum stays
        v = loaded[u];
        idx = base + u * blockDim.x;
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) {
      v = ov;
      idx = oi;
    }
  }
  if ((threadIdx.x & 31) == 0) {
    best_v[threadIdx.x >> 5] = v;
    best_i[threadIdx.x >> 5] = idx;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < blockDim.x / 32; ++w) {
    if (best_v[w] > v || (best_v[w] == v && best_i[w] < idx)) {
      v = best_v[w];
      idx = best_i[w];
    }
  }
  next[blockIdx.x] = first_token + idx;
}

}  // namespace

GpuStatus LaunchEmbed(const int* tokens, int batch, int hidden, uint64_t seed,
                      float scale, float* h, cudaStream_t stream) {
  return LaunchOverlapped(EmbedKernel, dim3(Blocks(hidden), batch), kThreads, 0,
                          stream, tokens, hidden, seed, scale, h);
}

GpuStatus CheckNormWidth(int n) {
  if (n <= kNormThreads * kNormPerThread) return OkStatus();
  return Fail(RunStatus::kCannotImplement,
              "RMSNorm holds a row in registers: at most " +
                  std::to_string(kNormThreads * kNormPerThread) +
                  " values, got " + std::to_string(n));
}

GpuStatus LaunchAddRmsNorm(float* h, const float* add, const float* gamma,
                           int n, float eps, int batch, const NormOut& out,
                           cudaStream_t stream) {
  MG_RETURN_IF_ERROR(CheckNormWidth(n));
  return LaunchOverlapped(RmsNormKernel, batch, kNormThreads, 0, stream, h, n,
                          add, gamma, n, eps, out);
}

GpuStatus LaunchRowNorms(const RowNorms& norms, int batch,
                         cudaStream_t stream) {
  if (norms.jobs < 1 || norms.jobs > RowNorms::kMaxJobs) {
    return Fail(RunStatus::kBadProblem,
                "RowNorms.jobs: 1 to " + std::to_string(RowNorms::kMaxJobs) +
                    ", got " + std::to_string(norms.jobs));
  }
  for (int j = 0; j < norms.jobs; ++j)
    MG_RETURN_IF_ERROR(CheckNormWidth(norms.job[j].n));
  // One block a row: wide, so that a row of 6144 is a few loads a thread.
  return LaunchOverlapped(RowNormsKernel, dim3(norms.jobs, batch), kNormThreads,
                          0, stream, norms);
}

GpuStatus LaunchRope(float* x, int rows, int stride, int offset,
                     const RopeTable& rope, cudaStream_t stream) {
  return LaunchRopeRows(RopeRows{x, rows, stride, offset}, RopeRows{}, rope,
                        stream);
}

GpuStatus LaunchRopeRows(const RopeRows& a, const RopeRows& b,
                         const RopeTable& rope, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(a.rows + b.rows) * rope.pairs;
  if (n == 0) return OkStatus();
  return LaunchOverlapped(RopeKernel, Blocks(n), kThreads, 0, stream, a, b,
                          rope);
}

GpuStatus LaunchAppendEntries(const AppendEntries& a, cudaStream_t stream) {
  return LaunchOverlapped(
      a.latent_fp8 != nullptr ? AppendFp8EntriesKernel : AppendEntriesKernel,
      a.batch, 256, 0, stream, a);
}

GpuStatus LaunchSiluMul(const float* gu, int width, int batch, float* act,
                        cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(width) * batch;
  return LaunchOverlapped(SiluMulKernel, Blocks(n), kThreads, 0, stream, gu,
                          width, batch, act);
}

GpuStatus LaunchArgMax(const float* logits, int width, int batch,
                       int first_token, int* next, cudaStream_t stream) {
  return LaunchOverlapped(ArgMaxKernel, batch, kArgMaxThreads, 0, stream,
                          logits, width, first_token, next);
}

namespace {

// One thread an entry of the [world][batch] table.
__global__ void PostBestKernel(const float* logits, int width, int first_token,
                               const int* next, int batch, int rank, int world,
                               float* best) {
  EnterAfterPriorKernels();
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= world * batch) return;
  const int r = e / batch, i = e % batch;
  float logit = 0.0f, token = 0.0f;
  if (r == rank) {
    logit = logits[static_cast<int64_t>(i) * width + next[i] - first_token];
    token = static_cast<float>(next[i]);  // exact: vocab < 2^24
  }
  best[2 * e] = logit;
  best[2 * e + 1] = token;
}

__global__ void PickBestKernel(const float* best, int batch, int world,
                               int* next) {
  EnterAfterPriorKernels();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch) return;
  float v = best[2 * i];
  int token = static_cast<int>(best[2 * i + 1]);
  for (int r = 1; r < world; ++r) {
    const float* e = best + 2 * (static_cast<int64_t>(r) * batch + i);
    const int t = static_cast<int>(e[1]);
    if (e[0] > v || (e[0] == v && t < token)) {
      v = e[0];
      token = t;
    }
  }
  next[i] = token;
}

}  // namespace

GpuStatus LaunchPostBest(const float* logits, int width, int first_token,
                         const int* next, int batch, int rank, int world,
                         float* best, cudaStream_t stream) {
  const int entries = world * batch;
  return LaunchOverlapped(PostBestKernel, (entries + 255) / 256, 256, 0, stream,
                          logits, width, first_token, next, batch, rank, world,
                          best);
}

GpuStatus LaunchPickBest(const float* best, int batch, int world, int* next,
                         cudaStream_t stream) {
  return LaunchOverlapped(PickBestKernel, (batch + 255) / 256, 256, 0, stream,
                          best, batch, world, next);
}

}  // namespace moetune::gpu
