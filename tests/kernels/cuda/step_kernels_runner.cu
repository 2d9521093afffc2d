#include <cuda_runtime.h>

#include "kernels/cuda/base/carveout.h"
#include "kernels/cuda/step/gemv.cuh"
#include "kernels/cuda/step/gemv_mma.cuh"
#include "kernels/cuda/step/gemv_nvfp4_mma.cuh"
#include "kernels/cuda/step/gemv_wgmma.cuh"
#include "kernels/cuda/step/index_scores_mma.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/mla_mma.cuh"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

// The shape's fields, which the BF16 and NVFP4 GEMVs name alike.
template <class Gemv>
Gemv WithShape(const GemvShape& s) {
  Gemv g;
  g.k = s.k;
  g.rows_per_x = s.rows_per_x;
  g.w_group_stride = s.w_group_stride;
  g.w_group_offset = s.w_group_offset;
  g.x_stride = s.x_stride;
  g.x_group_stride = s.x_group_stride;
  g.batch = s.batch;
  g.rows = s.rows;
  return g;
}

Bf16Gemv ToGemv(const GemvShape& s) { return WithShape<Bf16Gemv>(s); }

// Device buffers freed when the run ends, however it ends.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  T* Alloc(size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) return nullptr;
    owned_.push_back(p);
    return static_cast<T*>(p);
  }

 private:
  std::vector<void*> owned_;
};

template <class T>
T* Copied(DeviceBuffers& buffers, const std::vector<T>& host) {
  T* d = buffers.Alloc<T>(host.size());
  if (d != nullptr) {
    cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  return d;
}

IndexerScores ToScores(const ScoresShape& shape) {
  IndexerScores s;
  s.heads = shape.heads;
  s.dim = shape.dim;
  s.context = shape.context;
  s.batch = shape.batch;
  s.key_stride = shape.key_stride;
  s.w_scale = shape.w_scale;
  s.dot_scale = shape.dot_scale;
  return s;
}

}  // namespace

std::string RunIndexerScores(const ScoresShape& shape,
                             const std::vector<float>& q,
                             const std::vector<float>& w,
                             const std::vector<uint8_t>& keys,
                             const std::vector<float>& new_key,
                             std::vector<float>* scores) {
  DeviceBuffers buffers;
  IndexerScores s = ToScores(shape);
  s.q = Copied(buffers, q);
  s.w = Copied(buffers, w);
  s.keys = Copied(buffers, keys);
  s.new_key = Copied(buffers, new_key);
  const size_t n = static_cast<size_t>(shape.batch) * (shape.context + 1);
  s.scores = buffers.Alloc<float>(n);
  if (!s.q || !s.w || !s.keys || !s.new_key || !s.scores) {
    return "cudaMalloc failed";
  }
  const GpuStatus launched = LaunchIndexerScores(s, nullptr, LaunchPolicy{});
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the scores failed";
  scores->resize(n);
  cudaMemcpy(scores->data(), s.scores, n * sizeof(float),
             cudaMemcpyDeviceToHost);
  return "";
}

std::string RunTopK(const std::vector<float>& scores, int n, int k, int batch,
                    std::vector<std::vector<int>>* kept) {
  DeviceBuffers buffers;
  const float* d_scores = Copied(buffers, scores);
  int* d_kept = buffers.Alloc<int>(static_cast<size_t>(batch) * k);
  int* d_kept_n = buffers.Alloc<int>(batch);
  if (!d_scores || !d_kept || !d_kept_n) return "cudaMalloc failed";
  const GpuStatus launched = LaunchTopK(d_scores, n, k, batch, d_kept, d_kept_n,
                                        nullptr, LaunchPolicy{});
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the top-k failed";
  std::vector<int> all(static_cast<size_t>(batch) * k), counts(batch);
  cudaMemcpy(all.data(), d_kept, all.size() * sizeof(int),
             cudaMemcpyDeviceToHost);
  cudaMemcpy(counts.data(), d_kept_n, counts.size() * sizeof(int),
             cudaMemcpyDeviceToHost);
  kept->assign(batch, {});
  for (int b = 0; b < batch; ++b) {
    if (counts[b] < 0 || counts[b] > k) return "a kept count out of range";
    (*kept)[b].assign(all.begin() + static_cast<size_t>(b) * k,
                      all.begin() + static_cast<size_t>(b) * k + counts[b]);
  }
  return "";
}

namespace {

// The shape's dims as a SparseAttention (no buffers).
SparseAttention AttentionOf(const AttentionShape& shape) {
  SparseAttention a;
  a.heads = shape.heads;
  a.kv_lora = shape.kv_lora;
  a.rope = shape.rope;
  a.context = shape.context;
  a.batch = shape.batch;
  a.k = shape.k;
  a.cache_stride = shape.cache_stride;
  a.scale = shape.scale;
  return a;
}

// The SMs the launch is told of: the shape's, or the device's.
int SmCountOf(const AttentionShape& shape) {
  int sm_count = shape.sm_count;
  if (sm_count == 0) {
    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0);
  }
  return sm_count;
}

}  // namespace

std::string RunSparseAttention(const AttentionShape& shape,
                               const AttentionData& data,
                               std::vector<float>* out_lat) {
  DeviceBuffers buffers;
  SparseAttention a = AttentionOf(shape);
  a.q_lat = Copied(buffers, data.q_lat);
  a.q = Copied(buffers, data.q_rope);  // rope part at offset 0
  a.q_head_stride = shape.rope;
  a.q_stride = static_cast<int64_t>(shape.heads) * shape.rope;
  a.latent = Copied(buffers, data.latent);
  a.new_entry = Copied(buffers, data.new_entry);
  a.kept = Copied(buffers, data.kept);
  a.kept_n = Copied(buffers, data.kept_n);
  const size_t out_n =
      static_cast<size_t>(shape.batch) * shape.heads * shape.kv_lora;
  a.out_lat = buffers.Alloc<float>(out_n);
  a.partial = buffers.Alloc<float>(
      static_cast<size_t>(shape.batch) * shape.heads *
      SparseAttentionSplits(shape.k) * (shape.kv_lora + 2));
  if (!a.q_lat || !a.q || !a.latent || !a.new_entry || !a.kept || !a.kept_n ||
      !a.out_lat || !a.partial) {
    return "cudaMalloc failed";
  }
  if (shape.query_scratch) {
    a.query_frags = buffers.Alloc<uint2>(SparseAttentionQueryFrags(
        shape.batch, shape.heads, shape.kv_lora + shape.rope));
    a.fresh_dots =
        buffers.Alloc<float>(static_cast<size_t>(shape.batch) * shape.heads);
    if (!a.query_frags || !a.fresh_dots) return "cudaMalloc failed";
  }
  const GpuStatus launched =
      LaunchSparseAttention(a, SmCountOf(shape), nullptr, LaunchPolicy{});
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the attention failed";
  out_lat->resize(out_n);
  cudaMemcpy(out_lat->data(), a.out_lat, out_n * sizeof(float),
             cudaMemcpyDeviceToHost);
  return "";
}

bool TensorCoreAttentionTakes(const AttentionShape& shape) {
  return SparseAttentionMmaFits(AttentionOf(shape));
}

int AttentionBlockTiles(const AttentionShape& shape) {
  SparseAttention a = AttentionOf(shape);
  if (shape.query_scratch) {  // only whether they are given counts here
    a.query_frags = reinterpret_cast<uint2*>(uintptr_t{256});
    a.fresh_dots = reinterpret_cast<float*>(uintptr_t{256});
  }
  return SparseAttentionBlockTiles(a, SmCountOf(shape));
}

int QueriesMadeBeforeFromBatch() { return kPrebuiltQueriesFromBatch; }

bool TensorCoreScoresTake(const ScoresShape& shape) {
  IndexerScores s = ToScores(shape);
  s.q = reinterpret_cast<const float*>(uintptr_t{256});  // aligned
  s.keys = reinterpret_cast<const uint8_t*>(uintptr_t{256});
  return IndexerScoresMmaFits(s);
}

std::string RunGemvBf16(const GemvShape& shape, const std::vector<uint16_t>& w,
                        const std::vector<float>& x,
                        std::vector<std::vector<float>>* y) {
  DeviceBuffers buffers;
  uint16_t* dw = buffers.Alloc<uint16_t>(w.size());
  float* dx = buffers.Alloc<float>(x.size());
  if (dw == nullptr || dx == nullptr) return "cudaMalloc failed";
  cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  Bf16Gemv g = ToGemv(shape);
  g.w = dw;
  g.x = dx;
  const std::vector<int> rows =
      shape.segments.empty() ? std::vector<int>{shape.rows} : shape.segments;
  std::vector<float*> outs;
  if (!shape.segments.empty()) g.rows = 0;
  for (int r : rows) {
    outs.push_back(buffers.Alloc<float>(static_cast<size_t>(r) * shape.batch));
    if (outs.back() == nullptr) return "cudaMalloc failed";
    if (shape.segments.empty()) {
      g.y = outs.back();
      g.y_stride = r;
    } else {
      AddGemvSegment(&g, r, outs.back(), r);
    }
  }
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  if (shape.force_wgmma && !GemvBf16WgmmaFits(g)) {
    return "the wgmma GEMV does not take the shape";
  }
  LaunchPolicy policy;
  policy.weights_ahead = shape.weights_ahead;
  const GpuStatus launched = shape.force_wgmma
                                 ? LaunchGemvBf16Wgmma(g, nullptr, policy)
                                 : LaunchGemvBf16(g, nullptr, policy);
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the GEMV failed";
  y->clear();
  for (size_t s = 0; s < rows.size(); ++s) {
    y->emplace_back(static_cast<size_t>(rows[s]) * shape.batch);
    cudaMemcpy(y->back().data(), outs[s], y->back().size() * 4,
               cudaMemcpyDeviceToHost);
  }
  return "";
}

Nvfp4Gemv ToNvfp4(const GemvShape& s) {
  Nvfp4Gemv g = WithShape<Nvfp4Gemv>(s);
  g.y_stride = s.rows;
  return g;
}

std::string RunGemvNvfp4(const GemvShape& shape,
                         const std::vector<uint8_t>& codes,
                         const std::vector<uint8_t>& scales, float tensor_scale,
                         const std::vector<float>& x, std::vector<float>* y) {
  DeviceBuffers buffers;
  Nvfp4Gemv g = ToNvfp4(shape);
  g.codes = Copied(buffers, codes);
  g.scales = Copied(buffers, scales);
  g.x = Copied(buffers, x);
  g.tensor_scale = tensor_scale;
  const size_t n = static_cast<size_t>(shape.rows) * shape.batch;
  g.y = buffers.Alloc<float>(n);
  if (!g.codes || !g.scales || !g.x || !g.y) return "cudaMalloc failed";
  if (shape.x_parts) {
    const int rpx = shape.rows_per_x ? shape.rows_per_x : shape.rows;
    const int groups = (shape.rows + rpx - 1) / rpx;
    g.x_parts = buffers.Alloc<uint2>(
        Nvfp4GemvInputParts(shape.batch, int64_t{groups} * shape.k));
    if (!g.x_parts) return "cudaMalloc failed";
  }
  const GpuStatus launched = LaunchGemvNvfp4(g, nullptr, LaunchPolicy{});
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the GEMV failed";
  y->resize(n);
  cudaMemcpy(y->data(), g.y, n * sizeof(float), cudaMemcpyDeviceToHost);
  return "";
}

std::string RunAbsorbQuery(const AbsorbShape& shape,
                           const std::vector<uint16_t>& kv_b,
                           const std::vector<float>& q,
                           std::vector<float>* q_lat) {
  DeviceBuffers buffers;
  uint16_t* dw = buffers.Alloc<uint16_t>(kv_b.size());
  float* dq = buffers.Alloc<float>(q.size());
  const size_t out =
      static_cast<size_t>(shape.batch) * shape.heads * shape.kv_lora;
  float* dl = buffers.Alloc<float>(out);
  if (dw == nullptr || dq == nullptr || dl == nullptr) {
    return "cudaMalloc failed";
  }
  cudaMemcpy(dw, kv_b.data(), kv_b.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice);
  AbsorbQuery a;
  a.kv_b = dw;
  a.heads = shape.heads;
  a.nope = shape.nope;
  a.v_dim = shape.v_dim;
  a.kv_lora = shape.kv_lora;
  a.q = dq;
  a.q_head_stride = shape.q_head;
  a.q_stride = int64_t{shape.heads} * shape.q_head;
  a.q_lat = dl;
  a.batch = shape.batch;
  const GpuStatus launched = LaunchAbsorbQuery(a, nullptr, LaunchPolicy{});
  if (!launched.ok()) return launched.message;
  if (cudaDeviceSynchronize() != cudaSuccess) return "the absorption failed";
  q_lat->resize(out);
  cudaMemcpy(q_lat->data(), dl, out * 4, cudaMemcpyDeviceToHost);
  return "";
}

bool TensorCoresTakeNvfp4(const GemvShape& shape) {
  Nvfp4Gemv g = ToNvfp4(shape);
  g.x = reinterpret_cast<const float*>(uintptr_t{256});  // aligned
  return GemvNvfp4MmaFits(g);
}

bool TensorCoresTake(const GemvShape& shape) {
  Bf16Gemv g = ToGemv(shape);
  g.x = reinterpret_cast<const float*>(uintptr_t{256});  // aligned
  return GemvBf16MmaFits(g);
}

int TensorCoreMinBatch() { return kGemvMmaMinBatch; }

int Nvfp4SplitOnceFromBatch() { return kNvfp4SplitOnceFromBatch; }

namespace {

// The shape as the wgmma GEMV would be given it: 16-byte aligned weights
// and inputs (placeholders, never read), rows_per_x set.
Bf16Gemv WgmmaPlaceholder(const GemvShape& shape) {
  Bf16Gemv g = ToGemv(shape);
  g.x = reinterpret_cast<const float*>(uintptr_t{256});
  g.w = reinterpret_cast<const uint16_t*>(uintptr_t{256});
  if (g.rows_per_x == 0) g.rows_per_x = g.rows;
  return g;
}

}  // namespace

bool WgmmaTakes(const GemvShape& shape) {
  return GemvBf16WgmmaFits(WgmmaPlaceholder(shape));
}

int WgmmaMinBatch() { return kGemvWgmmaMinBatch; }

int WgmmaWarpgroups(const GemvShape& shape) {
  return GemvBf16WgmmaWarpgroups(WgmmaPlaceholder(shape));
}

namespace {

__global__ void SharedMemoryKernel(float* out) {
  __shared__ float held[kCarveoutKernelSharedBytes / sizeof(float)];
  held[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = held[blockDim.x - 1 - threadIdx.x];
}

}  // namespace

int CarveoutOfASharedMemoryKernel(int64_t blocks, CarveoutDevice* device) {
  int id = 0;
  cudaGetDevice(&id);
  cudaDeviceGetAttribute(&device->sms, cudaDevAttrMultiProcessorCount, id);
  cudaDeviceGetAttribute(&device->most,
                         cudaDevAttrMaxSharedMemoryPerMultiprocessor, id);
  cudaDeviceGetAttribute(&device->reserved,
                         cudaDevAttrReservedSharedMemoryPerBlock, id);
  return FittedCarveout(reinterpret_cast<const void*>(&SharedMemoryKernel),
                        blocks, 256, 0);
}

}  // namespace moetune::gpu::testing
