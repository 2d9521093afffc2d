#include "kernels/reference/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/moe_reference.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::ref {
namespace {

StepSpec TinySpec(RoutingSpec::Kind kind = RoutingSpec::Kind::kUniform) {
  StepSpec spec = testing::PresetSpec("tiny", 11);
  spec.batch = 16;
  spec.routing.kind = kind;
  return spec;
}

// s = sigmoid({0, 1, 2, -1}) = {0.5, 0.7311, 0.8808, 0.2689}.
TEST(RouteTokenTest, PicksTopKBySigmoidByHand) {
  const float logits[4] = {0.0f, 1.0f, 2.0f, -1.0f};
  const float no_bias[4] = {0, 0, 0, 0};
  const Route route = RouteToken(logits, no_bias, 4, 2, 2.5f);
  ASSERT_EQ(route.experts, (std::vector<int>{2, 1}));
  EXPECT_NEAR(route.weights[0], 1.36612276f, 1e-6);  // .8808/(.8808+.7311)*2.5
  EXPECT_NEAR(route.weights[1], 1.13387724f, 1e-6);
}

TEST(RouteTokenTest, BiasChangesTheChoiceButNotTheWeights) {
  const float logits[4] = {0.0f, 1.0f, 2.0f, -1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};  // expert 3: .2689 + 1
  const Route route = RouteToken(logits, bias, 4, 2, 2.5f);
  ASSERT_EQ(route.experts, (std::vector<int>{3, 2}));
  // Unbiased s: .2689 / (.2689 + .8808) * 2.5 and .8808 / (...) * 2.5.
  EXPECT_NEAR(route.weights[0], 0.58478824f, 1e-6);
  EXPECT_NEAR(route.weights[1], 1.91521176f, 1e-6);
  EXPECT_NEAR(route.weights[0] + route.weights[1], 2.5f, 1e-6);
}

TEST(RouteTokenTest, TiesGoToTheLowerExpertIndex) {
  const float zeros[5] = {0, 0, 0, 0, 0};
  Route route = RouteToken(zeros, zeros, 5, 3, 2.5f);
  ASSERT_EQ(route.experts, (std::vector<int>{0, 1, 2}));
  for (float w : route.weights) EXPECT_NEAR(w, 2.5f / 3, 1e-6);
  const float bias[5] = {0.0f, 0.0f, 0.1f, 0.1f, 0.0f};
  route = RouteToken(zeros, bias, 5, 1, 2.5f);
  ASSERT_EQ(route.experts, (std::vector<int>{2}));
  EXPECT_NEAR(route.weights[0], 2.5f, 1e-6);
}

// s = sigmoid({0, 1, 2, -1, 0.99}): experts 1 and 4 2.0e-3 apart.
TEST(RouteTokenNearTest, TakesAProposalOnlyWithinTheTolerance) {
  const float logits[5] = {0.0f, 1.0f, 2.0f, -1.0f, 0.99f};
  const float bias[5] = {0, 0, 0, 0, 0};
  const Route own = RouteToken(logits, bias, 5, 2, 2.5f);
  ASSERT_EQ(own.experts, (std::vector<int>{2, 1}));
  const int same[2] = {1, 2};  // the own choice, in another order
  Route r = RouteTokenNear(logits, bias, 5, 2, 2.5f, same, 1e-2f);
  EXPECT_EQ(r.experts, own.experts);
  EXPECT_EQ(r.weights, own.weights);
  const int near[2] = {4, 2};  // 4 for 1: s(0.99) is 2.0e-3 below s(1)
  r = RouteTokenNear(logits, bias, 5, 2, 2.5f, near, 1e-2f);
  ASSERT_EQ(r.experts, (std::vector<int>{2, 4}));
  const double s2 = 1 / (1 + std::exp(-2.0)), s4 = 1 / (1 + std::exp(-0.99));
  EXPECT_NEAR(r.weights[0], s2 / (s2 + s4) * 2.5, 1e-6);
  EXPECT_NEAR(r.weights[1], s4 / (s2 + s4) * 2.5, 1e-6);
  EXPECT_EQ(RouteTokenNear(logits, bias, 5, 2, 2.5f, near, 1e-3f).experts,
            own.experts);     // 2.0e-3 is past the tolerance
  const int far[2] = {0, 2};  // expert 0: s 0.5, far below
  EXPECT_EQ(RouteTokenNear(logits, bias, 5, 2, 2.5f, far, 1e-2f).experts,
            own.experts);
  const int twice[2] = {2, 2}, outside[2] = {2, 7};
  EXPECT_EQ(RouteTokenNear(logits, bias, 5, 2, 2.5f, twice, 1.0f).experts,
            own.experts);
  EXPECT_EQ(RouteTokenNear(logits, bias, 5, 2, 2.5f, outside, 1.0f).experts,
            own.experts);
}

TEST(RouterTest, LogitsAreTheBf16RouterTimesX) {
  const StepSpec spec = TinySpec();
  std::vector<float> x(256);
  for (int c = 0; c < 256; ++c) x[c] = std::sin(0.1f * c);
  const std::vector<float> logits = RouterLogits(spec, 2, x.data());
  ASSERT_EQ(logits.size(), 32u);
  for (int e : {0, 13, 31}) {
    double expected = 0.0;
    for (int c = 0; c < 256; ++c) {
      expected += double{weights::Bf16Weight(11, 2, weights::kRouter,
                                             e * 256 + c, 1.0f / 16.0f)} *
                  x[c];
    }
    EXPECT_FLOAT_EQ(logits[e], static_cast<float>(expected)) << e;
  }
}

TEST(RouterBiasTest, UniformIsSmallNoise) {
  const std::vector<float> bias = RouterBias(TinySpec(), 1);
  ASSERT_EQ(bias.size(), 32u);
  for (float b : bias) EXPECT_LT(std::fabs(b), 0.01f);
  EXPECT_NE(*std::min_element(bias.begin(), bias.end()),
            *std::max_element(bias.begin(), bias.end()));
}

TEST(RouterBiasTest, SkewedFollowsZipfOverASeededPermutation) {
  StepSpec spec = TinySpec(RoutingSpec::Kind::kSkewed);
  spec.routing.skew = 1.0;
  const std::vector<int> order = SkewedExpertOrder(spec, 1);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> identity(32);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);                   // a permutation
  EXPECT_NE(order, identity);                    // and a shuffled one
  EXPECT_NE(order, SkewedExpertOrder(spec, 2));  // per layer
  const std::vector<float> bias = RouterBias(spec, 1);
  EXPECT_FLOAT_EQ(bias[order[0]], 0.5f);
  EXPECT_FLOAT_EQ(bias[order[1]], 0.25f);
  EXPECT_FLOAT_EQ(bias[order[3]], 0.125f);
  EXPECT_FLOAT_EQ(bias[order[31]], 0.5f / 32);
  spec.routing.skew = 2.0;
  EXPECT_FLOAT_EQ(RouterBias(spec, 1)[order[2]], 0.5f / 9);
}

TEST(RouterBiasTest, ReplayedScalesTheHistogram) {
  StepSpec spec = TinySpec(RoutingSpec::Kind::kReplayed);
  spec.routing.histogram.assign(32, 0.0);
  spec.routing.histogram[0] = 1;
  spec.routing.histogram[1] = 2;
  spec.routing.histogram[2] = 4;
  const std::vector<float> bias = RouterBias(spec, 1);
  EXPECT_EQ(bias[0], 0.125f);
  EXPECT_EQ(bias[1], 0.25f);
  EXPECT_EQ(bias[2], 0.5f);
  EXPECT_EQ(bias[3], 0.0f);
}

TEST(RouterTest, SkewedRoutingSendsEveryTokenToTheHotExpert) {
  StepSpec spec = TinySpec(RoutingSpec::Kind::kSkewed);
  spec.routing.skew = 2.0;
  const int layer = spec.config.num_dense_layers;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  const int hot = SkewedExpertOrder(spec, layer)[0];
  for (const Route& route : RouteBatch(spec, layer, x.data(), spec.batch)) {
    EXPECT_EQ(route.experts[0], hot);
    EXPECT_EQ(route.experts.size(), 8u);
    EXPECT_NEAR(
        std::accumulate(route.weights.begin(), route.weights.end(), 0.0), 2.5,
        1e-5);
  }
}

TEST(RouterTest, UniformRoutingSpreadsTokens) {
  const StepSpec spec = TinySpec();
  const int layer = spec.config.num_dense_layers;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  std::vector<int> hits(32, 0);
  for (const Route& route : RouteBatch(spec, layer, x.data(), spec.batch)) {
    for (int e : route.experts) ++hits[e];
    EXPECT_NEAR(
        std::accumulate(route.weights.begin(), route.weights.end(), 0.0), 2.5,
        1e-5);
  }
  // 16 tokens x 8 choices over 32 experts: many distinct experts are used.
  EXPECT_GE(
      std::count_if(hits.begin(), hits.end(), [](int h) { return h > 0; }), 20);
}

}  // namespace
}  // namespace moetune::ref
