#include "kernels/cuda/bench/cpu_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu::cpu {
namespace {

float RoundBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}

// One row [k_full] of an NVFP4 tensor, restricted to columns
// [col0, col0 + n), decoded in double.
void DecodeRow(const MoeProblem& p, uint32_t tensor, int64_t row,
               int64_t k_full, int64_t col0, int n, double tensor_scale,
               double* out) {
  const uint32_t layer = static_cast<uint32_t>(p.layer);
  for (int i = 0; i < n; i += 2) {
    const int64_t col = col0 + i;
    const uint8_t byte = weights::Nvfp4CodeByte(p.seed, layer, tensor,
                                                row * (k_full / 2) + col / 2);
    const double scale = nvfp4::E4M3ToFloat(weights::Nvfp4ScaleByte(
        p.seed, layer, tensor, row * (k_full / 16) + col / 16));
    out[i] = nvfp4::E2M1ToFloat(byte & 15u) * scale * tensor_scale;
    out[i + 1] = nvfp4::E2M1ToFloat(byte >> 4) * scale * tensor_scale;
  }
}

struct Shard {
  int tp_rank, ep_rank, inter_local, e_lo, e_hi;
  bool shared;
};

Shard ShardOf(const MoeProblem& p) {
  Shard s;
  s.tp_rank = p.shard.rank % p.shard.tp;
  s.ep_rank = p.shard.rank / p.shard.tp;
  s.inter_local = p.dims.moe_inter / p.shard.tp;
  const int per = p.dims.num_experts / p.shard.ep;
  s.e_lo = s.ep_rank * per;
  s.e_hi = s.e_lo + per;
  s.shared = p.dims.num_shared > 0 && s.ep_rank == 0;
  return s;
}

// h = SiLU(gate x) * (up x) of the slice, for intermediate indices
// [i0, i1) of tensor `gate_up`.
void Intermediate(const MoeProblem& p, const Shard& s, uint32_t gate_up,
                  const float* x, int i0, int i1, double* h) {
  const int hidden = p.dims.hidden;
  const double ts = weights::Nvfp4TensorScale(hidden);
  std::vector<double> row(static_cast<size_t>(hidden));
  for (int i = i0; i < i1; ++i) {
    double acc[2] = {0, 0};
    for (int half = 0; half < 2; ++half) {
      const int64_t r = half * p.dims.moe_inter + s.tp_rank * s.inter_local + i;
      DecodeRow(p, gate_up, r, hidden, 0, hidden, ts, row.data());
      for (int c = 0; c < hidden; ++c) acc[half] += row[c] * x[c];
    }
    h[i] = acc[0] / (1.0 + std::exp(-acc[0])) * acc[1];
  }
}

void IntermediateThreaded(const MoeProblem& p, const Shard& s, uint32_t gate_up,
                          const float* x, int threads, std::vector<double>* h) {
  h->assign(static_cast<size_t>(s.inter_local), 0.0);
  std::vector<std::thread> pool;
  const int n = std::max(1, threads);
  for (int t = 0; t < n; ++t) {
    const int i0 = s.inter_local * t / n, i1 = s.inter_local * (t + 1) / n;
    pool.emplace_back(Intermediate, std::cref(p), std::cref(s), gate_up, x, i0,
                      i1, h->data());
  }
  for (std::thread& th : pool) th.join();
}

double DownRow(const MoeProblem& p, const Shard& s, uint32_t down, int row,
               const std::vector<double>& h) {
  std::vector<double> w(static_cast<size_t>(s.inter_local));
  DecodeRow(p, down, row, p.dims.moe_inter,
            static_cast<int64_t>(s.tp_rank) * s.inter_local, s.inter_local,
            weights::Nvfp4TensorScale(p.dims.moe_inter), w.data());
  double acc = 0;
  for (int i = 0; i < s.inter_local; ++i) acc += w[i] * h[i];
  return acc;
}

}  // namespace

std::vector<float> RoundedInput(const MoeProblem& problem) {
  std::vector<float> x(problem.input.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = RoundBf16(problem.input[i]);
  return x;
}

TokenRoute Route(const MoeProblem& p, const std::vector<float>& x, int t) {
  const int hidden = p.dims.hidden, experts = p.dims.num_experts;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::vector<float> s(static_cast<size_t>(experts)), score(s.size());
  for (int e = 0; e < experts; ++e) {
    double logit = 0;
    for (int c = 0; c < hidden; ++c) {
      logit += static_cast<double>(weights::Bf16Weight(
                   p.seed, static_cast<uint32_t>(p.layer), weights::kRouter,
                   static_cast<uint64_t>(e) * hidden + c, scale)) *
               x[static_cast<size_t>(t) * hidden + c];
    }
    s[e] = static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
    score[e] = s[e] + p.router_bias[e];
  }
  std::vector<int> order(s.size());
  for (int e = 0; e < experts; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return score[a] > score[b]; });
  TokenRoute route;
  double sum = 0;
  for (int r = 0; r < p.dims.top_k; ++r) sum += s[order[r]];
  for (int r = 0; r < p.dims.top_k; ++r) {
    route.experts.push_back(order[r]);
    route.weights.push_back(
        static_cast<float>(s[order[r]] / sum * p.dims.routed_scaling));
  }
  return route;
}

std::vector<double> OutputRows(const MoeProblem& p,
                               const std::vector<int>& tokens,
                               const std::vector<int>& rows, int threads) {
  const Shard s = ShardOf(p);
  const std::vector<float> x = RoundedInput(p);
  std::vector<double> out;
  for (int t : tokens) {
    const float* xt = x.data() + static_cast<size_t>(t) * p.dims.hidden;
    const TokenRoute route = Route(p, x, t);
    std::vector<double> y(rows.size(), 0.0), h;
    for (int j = 0; j <= p.dims.top_k; ++j) {
      const bool shared = j == p.dims.top_k;
      const int e = shared ? -1 : route.experts[j];
      if (shared ? !s.shared : (e < s.e_lo || e >= s.e_hi)) continue;
      const uint32_t gu =
          shared ? weights::kSharedGateUp : weights::ExpertGateUp(e);
      const uint32_t dn =
          shared ? weights::kSharedDown : weights::ExpertDown(e);
      IntermediateThreaded(p, s, gu, xt, threads, &h);
      const double w = shared ? 1.0 : route.weights[j];
      for (size_t i = 0; i < rows.size(); ++i)
        y[i] += w * DownRow(p, s, dn, rows[i], h);
    }
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

}  // namespace moetune::gpu::cpu
