#include "kernels/reference/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "kernels/model/near_top_k.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/ops.h"

namespace moetune::ref {
namespace {

// Hash indices of the skew permutation, apart from the uniform noise's.
constexpr uint64_t kPermutationIndexBase = uint64_t{1} << 32;

}  // namespace

std::vector<float> RouterLogits(const StepSpec& spec, int layer,
                                const float* x) {
  return RouterLogitsBatch(spec, layer, x, 1);
}

std::vector<float> RouterLogitsBatch(const StepSpec& spec, int layer,
                                     const float* x, int batch) {
  const Bf16TensorDesc w = Bf16Desc(spec, layer, weights::kRouter);
  const int hidden = static_cast<int>(w.k);
  const int experts = static_cast<int>(w.rows);
  std::vector<float> row(static_cast<size_t>(hidden));
  std::vector<float> logits(static_cast<size_t>(batch) * experts);
  for (int e = 0; e < experts; ++e) {
    for (int c = 0; c < hidden; ++c) row[c] = w.Weight(e, c);
    for (int b = 0; b < batch; ++b) {
      logits[static_cast<size_t>(b) * experts + e] = static_cast<float>(
          Dot(row.data(), x + static_cast<size_t>(b) * hidden, hidden));
    }
  }
  return logits;
}

std::vector<int> SkewedExpertOrder(const StepSpec& spec, int layer) {
  const int n = spec.config.num_experts;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) {  // Fisher-Yates, hash as the dice
    const uint64_t h =
        weights::Hash(spec.seed, static_cast<uint32_t>(layer),
                      weights::kRouterBias, kPermutationIndexBase + i);
    std::swap(order[i], order[h % static_cast<uint64_t>(i + 1)]);
  }
  return order;
}

std::vector<float> RouterBias(const StepSpec& spec, int layer) {
  const int n = spec.config.num_experts;
  const RoutingSpec& routing = spec.routing;
  std::vector<float> bias(static_cast<size_t>(n));
  switch (routing.kind) {
    case RoutingSpec::Kind::kUniform:
      for (int e = 0; e < n; ++e) {
        bias[e] = 0.005f * weights::UnitUniform(weights::Hash(
                               spec.seed, static_cast<uint32_t>(layer),
                               weights::kRouterBias, static_cast<uint64_t>(e)));
      }
      break;
    case RoutingSpec::Kind::kSkewed: {
      const std::vector<int> order = SkewedExpertOrder(spec, layer);
      for (int r = 1; r <= n; ++r) {
        bias[order[r - 1]] = static_cast<float>(
            0.5 / std::pow(static_cast<double>(r), routing.skew));
      }
      break;
    }
    case RoutingSpec::Kind::kReplayed: {
      const double max_count =
          *std::max_element(routing.histogram.begin(), routing.histogram.end());
      for (int e = 0; e < n; ++e) {
        bias[e] = static_cast<float>(0.5 * routing.histogram[e] / max_count);
      }
      break;
    }
  }
  return bias;
}

namespace {

// A token's sigmoids s and biased scores s + bias.
struct Scores {
  std::vector<float> s, score;
};
Scores ScoresOf(const float* logits, const float* bias, int num_experts) {
  Scores out{std::vector<float>(static_cast<size_t>(num_experts)),
             std::vector<float>(static_cast<size_t>(num_experts))};
  for (int e = 0; e < num_experts; ++e) {
    out.s[e] = Sigmoid(logits[e]);
    out.score[e] = out.s[e] + bias[e];
  }
  return out;
}

// A strict total order of experts: higher score first, then lower index.
auto Better(const std::vector<float>& score) {
  return [&score](int a, int b) {
    if (score[a] != score[b]) return score[a] > score[b];
    return a < b;
  };
}

// The route of `experts` (best first): the unbiased sigmoids / their sum
// times scaling.
Route Weighted(std::vector<int> experts, const Scores& sc, float scaling) {
  Route route;
  route.experts = std::move(experts);
  double sum = 0.0;
  for (int e : route.experts) sum += sc.s[e];
  for (int e : route.experts) {
    route.weights.push_back(static_cast<float>(sc.s[e] / sum * scaling));
  }
  return route;
}

// The top_k experts by score, best first.
std::vector<int> TopK(const Scores& sc, int top_k) {
  std::vector<int> order(sc.score.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                    Better(sc.score));
  order.resize(static_cast<size_t>(top_k));
  return order;
}

// Every token's route of x [batch][hidden] by `route(logits, bias, b)`.
template <typename RouteFn>
std::vector<Route> RouteEach(const StepSpec& spec, int layer, const float* x,
                             int batch, RouteFn route) {
  const model::ModelConfig& c = spec.config;
  const std::vector<float> logits = RouterLogitsBatch(spec, layer, x, batch);
  const std::vector<float> bias = RouterBias(spec, layer);
  std::vector<Route> routes;
  routes.reserve(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    routes.push_back(
        route(logits.data() + static_cast<size_t>(b) * c.num_experts,
              bias.data(), b));
  }
  return routes;
}

}  // namespace

Route RouteToken(const float* logits, const float* bias, int num_experts,
                 int top_k, float scaling) {
  const Scores sc = ScoresOf(logits, bias, num_experts);
  return Weighted(TopK(sc, top_k), sc, scaling);
}

Route RouteTokenNear(const float* logits, const float* bias, int num_experts,
                     int top_k, float scaling, const int* proposed,
                     float tolerance) {
  const Scores sc = ScoresOf(logits, bias, num_experts);
  std::vector<int> own = TopK(sc, top_k);
  if (!route::IsNearTopK(sc.score.data(), num_experts, proposed, top_k,
                         sc.score[own.back()], tolerance)) {
    return Weighted(std::move(own), sc, scaling);
  }
  std::vector<int> taken(proposed, proposed + top_k);
  std::sort(taken.begin(), taken.end(), Better(sc.score));
  return Weighted(std::move(taken), sc, scaling);
}

std::vector<Route> RouteBatch(const StepSpec& spec, int layer, const float* x,
                              int batch) {
  const model::ModelConfig& c = spec.config;
  return RouteEach(spec, layer, x, batch,
                   [&c](const float* logits, const float* bias, int) {
                     return RouteToken(logits, bias, c.num_experts,
                                       c.experts_per_token, c.routed_scaling);
                   });
}

std::vector<Route> RouteBatchNear(const StepSpec& spec, int layer,
                                  const float* x, int batch,
                                  const int* proposed, float tolerance) {
  const model::ModelConfig& c = spec.config;
  const int k = c.experts_per_token;
  return RouteEach(spec, layer, x, batch,
                   [&](const float* logits, const float* bias, int b) {
                     return RouteTokenNear(
                         logits, bias, c.num_experts, k, c.routed_scaling,
                         proposed + static_cast<size_t>(b) * k, tolerance);
                   });
}

}  // namespace moetune::ref
