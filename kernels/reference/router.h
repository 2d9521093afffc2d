// The MoE router of the reference (docs/design.md §2): s = sigmoid(BF16
// logits); the top-k experts by s + e_score_correction_bias; weights from the
// unbiased s, normalised to sum 1, times routed_scaling. The routing
// distribution of a StepSpec acts through the bias. Pure functions;
// thread-safe.
#pragma once

#include <vector>

#include "kernels/reference/step_spec.h"

namespace moetune::ref {

// Router logits of one token: BF16 weight [num_experts, hidden] times x.
std::vector<float> RouterLogits(const StepSpec& spec, int layer,
                                const float* x);
// The same for a batch: [batch][num_experts], each weight generated once.
std::vector<float> RouterLogitsBatch(const StepSpec& spec, int layer,
                                     const float* x, int batch);

// e_score_correction_bias [num_experts] of `layer`:
//   kUniform:  hash noise 0.005 * uniform(-1, 1), so |b| < 0.01;
//   kSkewed:   the expert of Zipf rank r (1-based; ranks are a seeded
//              per-layer permutation of the experts) gets 0.5 / r^skew;
//   kReplayed: 0.5 * histogram[e] / max(histogram).
// Assumes a valid routing spec (ValidateRouting).
std::vector<float> RouterBias(const StepSpec& spec, int layer);

// The seeded permutation behind kSkewed: element r-1 is the expert of Zipf
// rank r.
std::vector<int> SkewedExpertOrder(const StepSpec& spec, int layer);

struct Route {
  std::vector<int> experts;    // chosen, best biased score first
  std::vector<float> weights;  // same order; sum to `scaling`
};

// Picks top_k of sigmoid(logit) + bias (ties: the lower expert index wins);
// weights are the chosen unbiased sigmoids / their sum * scaling.
// Needs 1 <= top_k <= num_experts.
Route RouteToken(const float* logits, const float* bias, int num_experts,
                 int top_k, float scaling);

// RouteToken for every token of x [batch][hidden].
std::vector<Route> RouteBatch(const StepSpec& spec, int layer, const float* x,
                              int batch);

// RouteToken, but taking `proposed` (top_k expert indices another
// implementation chose) where they are a top-k of this token's biased
// scores to within `tolerance` (model/near_top_k.h IsNearTopK): a router fed
// activations carried in BF16 may break a near-tie the other way, and a
// check of several layers then compares the same experts. The weights are
// this router's own for the experts taken, best score first. Otherwise
// RouteToken's choice.
Route RouteTokenNear(const float* logits, const float* bias, int num_experts,
                     int top_k, float scaling, const int* proposed,
                     float tolerance);

// RouteTokenNear for every token: proposed [batch][top_k].
std::vector<Route> RouteBatchNear(const StepSpec& spec, int layer,
                                  const float* x, int batch,
                                  const int* proposed, float tolerance);

}  // namespace moetune::ref
