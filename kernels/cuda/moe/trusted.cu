#include <cmath>

#include "kernels/cuda/moe/trusted.cuh"
#include "kernels/model/near_top_k.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

struct TrustedParams {
  uint64_t seed;
  uint32_t layer;
  int batch, hidden, inter, inter_local, tp_offset, experts, top_k;
  int e_lo, e_hi, has_shared;
  float scaling, router_scale, ts_gate_up, ts_down;
  const float* x;
  const float* bias;
  float* logits;  // [batch][experts]
  float* score;   // [batch][experts]: sigmoid + bias, the selection's key
  // The backend's selection [batch][top_k], taken where it is a top-k of
  // these scores to within route::kTieTolerance (null: never).
  const int* candidate;
  int* idx;  // [batch][top_k]
  float* w;  // [batch][top_k]
  float* h;  // [batch][top_k + 1][inter_local]
  float* y;  // [batch][hidden]
};

// Weight (row, col) of NVFP4 tensor `tensor` with rows of k_full elements.
__device__ float HashWeight(const TrustedParams& p, uint32_t tensor,
                            int64_t row, int64_t col, int64_t k_full,
                            float tensor_scale) {
  const uint8_t byte = weights::Nvfp4CodeByte(p.seed, p.layer, tensor,
                                              row * (k_full / 2) + col / 2);
  const uint32_t code = (col % 2 == 0) ? (byte & 15u) : (byte >> 4);
  const uint8_t scale = weights::Nvfp4ScaleByte(p.seed, p.layer, tensor,
                                                row * (k_full / 16) + col / 16);
  return nvfp4::E2M1ToFloat(code) * nvfp4::E4M3ToFloat(scale) * tensor_scale;
}

__global__ void RouterKernel(TrustedParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(p.batch) * p.experts) return;
  const int t = static_cast<int>(i / p.experts),
            e = static_cast<int>(i % p.experts);
  float sum = 0.0f;
  for (int c = 0; c < p.hidden; ++c) {
    const float w = weights::Bf16Weight(p.seed, p.layer, weights::kRouter,
                                        static_cast<uint64_t>(e) * p.hidden + c,
                                        p.router_scale);
    sum += w * p.x[static_cast<int64_t>(t) * p.hidden + c];
  }
  p.logits[i] = sum;
}

// One thread per token: selection of the top-k by s + bias (ties: lower
// index), weights = s / sum(s) * scaling. Where the backend's selection
// (p.candidate) is a top-k of the same scores to within the tie tolerance,
// it is taken instead (route::IsNearTopK: a near-tie broken the other way).
__global__ void TopKKernel(TrustedParams p) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= p.batch) return;
  const float* logit = p.logits + static_cast<int64_t>(t) * p.experts;
  float* score = p.score + static_cast<int64_t>(t) * p.experts;
  for (int e = 0; e < p.experts; ++e)
    score[e] = 1.0f / (1.0f + expf(-logit[e])) + p.bias[e];
  int chosen[32];
  float kth = 0.0f;
  for (int r = 0; r < p.top_k; ++r) {
    int best = -1;
    for (int e = 0; e < p.experts; ++e) {
      bool taken = false;
      for (int q = 0; q < r; ++q) taken = taken || chosen[q] == e;
      if (!taken && (best < 0 || score[e] > score[best])) best = e;
    }
    chosen[r] = best;
    kth = score[best];
  }
  const int* cand =
      p.candidate == nullptr ? nullptr : p.candidate + t * p.top_k;
  if (cand != nullptr && route::IsNearTopK(score, p.experts, cand, p.top_k, kth,
                                           route::kTieTolerance)) {
    for (int r = 0; r < p.top_k; ++r) chosen[r] = cand[r];
  }
  float s[32], sum = 0.0f;
  for (int r = 0; r < p.top_k; ++r) {
    s[r] = 1.0f / (1.0f + expf(-logit[chosen[r]]));
    sum += s[r];
  }
  for (int r = 0; r < p.top_k; ++r) {
    p.idx[t * p.top_k + r] = chosen[r];
    p.w[t * p.top_k + r] = s[r] / sum * p.scaling;
  }
}

// Expert of token t's slot j (j == top_k: the shared one); -1 if not here.
__device__ int SlotExpert(const TrustedParams& p, int t, int j,
                          uint32_t* gate_up, uint32_t* down) {
  if (j == p.top_k) {
    *gate_up = weights::kSharedGateUp;
    *down = weights::kSharedDown;
    return p.has_shared ? 0 : -1;
  }
  const int e = p.idx[t * p.top_k + j];
  *gate_up = weights::ExpertGateUp(e);
  *down = weights::ExpertDown(e);
  return (e >= p.e_lo && e < p.e_hi) ? 0 : -1;
}

__global__ void GateUpKernel(TrustedParams p) {
  const int64_t n =
      static_cast<int64_t>(p.batch) * (p.top_k + 1) * p.inter_local;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int il = static_cast<int>(i % p.inter_local);
  const int j = static_cast<int>(i / p.inter_local % (p.top_k + 1));
  const int t = static_cast<int>(i / p.inter_local / (p.top_k + 1));
  uint32_t gate_up, down;
  if (SlotExpert(p, t, j, &gate_up, &down) < 0) return;
  const int64_t gate_row = p.tp_offset + il,
                up_row = p.inter + p.tp_offset + il;
  float g = 0.0f, u = 0.0f;
  for (int c = 0; c < p.hidden; ++c) {
    const float x = p.x[static_cast<int64_t>(t) * p.hidden + c];
    g += HashWeight(p, gate_up, gate_row, c, p.hidden, p.ts_gate_up) * x;
    u += HashWeight(p, gate_up, up_row, c, p.hidden, p.ts_gate_up) * x;
  }
  p.h[i] = g / (1.0f + expf(-g)) * u;
}

__global__ void DownKernel(TrustedParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(p.batch) * p.hidden) return;
  const int t = static_cast<int>(i / p.hidden),
            r = static_cast<int>(i % p.hidden);
  float y = 0.0f;
  for (int j = 0; j <= p.top_k; ++j) {
    uint32_t gate_up, down;
    if (SlotExpert(p, t, j, &gate_up, &down) < 0) continue;
    const float* h =
        p.h + (static_cast<int64_t>(t) * (p.top_k + 1) + j) * p.inter_local;
    float acc = 0.0f;
    for (int il = 0; il < p.inter_local; ++il) {
      acc +=
          HashWeight(p, down, r, p.tp_offset + il, p.inter, p.ts_down) * h[il];
    }
    y += (j == p.top_k ? 1.0f : p.w[t * p.top_k + j]) * acc;
  }
  p.y[i] = y;
}

unsigned Blocks(int64_t threads) {
  return static_cast<unsigned>((threads + 127) / 128);
}

}  // namespace

GpuStatus RunTrusted(const MoeProblem& problem, const Geometry& geo,
                     const float* x, const float* bias, const int* backend_topk,
                     float* y, cudaStream_t stream) {
  TrustedParams p{};
  p.seed = problem.seed;
  p.layer = static_cast<uint32_t>(problem.layer);
  p.batch = geo.batch;
  p.hidden = geo.hidden;
  p.inter = geo.inter;
  p.inter_local = geo.inter_local;
  p.tp_offset = geo.tp_rank * geo.inter_local;
  p.experts = geo.experts;
  p.top_k = geo.top_k;
  p.e_lo = geo.e_lo;
  p.e_hi = geo.e_hi;
  p.has_shared = geo.has_shared;
  p.scaling = geo.scaling;
  p.router_scale = 1.0f / std::sqrt(static_cast<float>(geo.hidden));
  p.ts_gate_up = weights::Nvfp4TensorScale(geo.hidden);
  p.ts_down = weights::Nvfp4TensorScale(geo.inter);
  p.x = x;
  p.bias = bias;
  p.candidate = backend_topk;
  p.y = y;
  const int64_t b = geo.batch;
  DeviceBuffer scratch;
  const size_t n_logits = b * geo.experts, n_topk = b * geo.top_k,
               n_h = b * (geo.top_k + 1) * geo.inter_local;
  auto carve = [&](Carver& c) {  // sized, then carved: one list
    p.logits = c.Take<float>(n_logits);
    p.score = c.Take<float>(n_logits);
    p.idx = c.Take<int>(n_topk);
    p.w = c.Take<float>(n_topk);
    p.h = c.Take<float>(n_h);
  };
  Carver sizing(nullptr);
  carve(sizing);
  MG_RETURN_IF_ERROR(scratch.Allocate(sizing.used()));
  Carver c(scratch.get());
  carve(c);
  RouterKernel<<<Blocks(n_logits), 128, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  TopKKernel<<<Blocks(b), 128, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  GateUpKernel<<<Blocks(n_h), 128, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  DownKernel<<<Blocks(b * geo.hidden), 128, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  MG_CUDA(cudaStreamSynchronize(stream));
  return OkStatus();
}

}  // namespace moetune::gpu
