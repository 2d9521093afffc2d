#include "kernels/reference/moe_reference.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/router.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::ref {
namespace {

StepSpec Spec(const char* preset, int batch,
              RoutingSpec::Kind kind = RoutingSpec::Kind::kUniform) {
  StepSpec spec = testing::PresetSpec(preset, 5);
  spec.batch = batch;
  spec.routing.kind = kind;
  spec.routing.skew = 1.5;
  return spec;
}

// max |a - b| / max |b|: relative to the output's scale, so near-zero
// elements do not dominate.
double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return err / scale;
}

std::vector<float> RunReference(const StepSpec& spec, int layer,
                                const std::vector<float>& x) {
  std::vector<float> y(x.size());
  MoeLayerReference(spec, layer, x.data(), spec.batch, y.data());
  return y;
}

// Expert(x) = down(SiLU(gate x) * (up x)) one weight at a time from
// Desc.Weight, for the full (unsharded) expert.
std::vector<double> ExpertByElements(const Nvfp4TensorDesc& gate_up,
                                     const Nvfp4TensorDesc& down,
                                     const float* x) {
  const int64_t inter = down.k, hidden = down.rows;
  std::vector<float> act(static_cast<size_t>(inter));
  for (int64_t j = 0; j < inter; ++j) {
    double g = 0.0, u = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      g += double{gate_up.Weight(j, c)} * x[c];
      u += double{gate_up.Weight(inter + j, c)} * x[c];
    }
    act[j] = Silu(static_cast<float>(g)) * static_cast<float>(u);
  }
  std::vector<double> y(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < hidden; ++r) {
    for (int64_t j = 0; j < inter; ++j)
      y[r] += double{down.Weight(r, j)} * act[j];
  }
  return y;
}

// The MoE sum written out for one token: route, then
// y = sum_k w_k Expert_k(x) + Shared(x).
TEST(MoeReferenceTest, MatchesTheFormulaForOneToken) {
  const StepSpec spec = Spec("tiny", 1);
  const int layer = 1;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  const std::vector<float> logits = RouterLogits(spec, layer, x.data());
  const std::vector<float> bias = RouterBias(spec, layer);
  const Route route = RouteToken(logits.data(), bias.data(), 32, 8, 2.5f);
  std::vector<double> expected = ExpertByElements(
      SharedGateUpDesc(spec, layer), SharedDownDesc(spec, layer), x.data());
  for (size_t k = 0; k < 8; ++k) {
    const std::vector<double> e = ExpertByElements(
        ExpertGateUpDesc(spec, layer, route.experts[k]),
        ExpertDownDesc(spec, layer, route.experts[k]), x.data());
    for (int r = 0; r < 256; ++r) expected[r] += route.weights[k] * e[r];
  }
  const std::vector<float> y = RunReference(spec, layer, x);
  EXPECT_LT(RelErr(y, std::vector<float>(expected.begin(), expected.end())),
            1e-6);
  double mean_square = 0.0;
  for (float v : y) mean_square += double{v} * v;
  EXPECT_GT(mean_square / 256, 1e-4);  // a real signal, not zeros
}

// Every rank's partial output sums to the unsharded output.
TEST(MoeReferenceTest, ShardsSumToTheUnshardedOutput) {
  for (auto kind : {RoutingSpec::Kind::kUniform, RoutingSpec::Kind::kSkewed}) {
    const StepSpec full = Spec("tiny", 3, kind);
    const int layer = 2;
    const std::vector<float> x = MoeLayerInput(full, layer);
    const std::vector<float> expected = RunReference(full, layer, x);
    const std::pair<int, int> grids[] = {
        {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}};
    for (const auto& [tp, ep] : grids) {
      std::vector<float> sum(x.size(), 0.0f);
      for (int rank = 0; rank < tp * ep; ++rank) {
        StepSpec spec = full;
        spec.shard = Shard{tp, ep, rank};
        ASSERT_TRUE(ValidateStepSpec(spec).ok());
        const std::vector<float> part = RunReference(spec, layer, x);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
      }
      EXPECT_LT(RelErr(sum, expected), 1e-6) << "tp " << tp << " ep " << ep;
    }
  }
}

TEST(MoeReferenceTest, ShardOwnership) {
  const model::ModelConfig c = *model::PresetByName("tiny");
  const Shard shard{2, 4, 5};  // ep_rank 2, tp_rank 1
  EXPECT_EQ(EpRank(shard), 2);
  EXPECT_EQ(TpRank(shard), 1);
  EXPECT_FALSE(OwnsExpert(c, shard, 15));
  EXPECT_TRUE(OwnsExpert(c, shard, 16));  // experts 16..23
  EXPECT_TRUE(OwnsExpert(c, shard, 23));
  EXPECT_FALSE(OwnsExpert(c, shard, 24));
  EXPECT_FALSE(OwnsShared(c, shard));
  EXPECT_TRUE(OwnsShared(c, Shard{2, 4, 1}));
  EXPECT_EQ(InterSlice(c, shard), 64);
  EXPECT_EQ(InterBegin(c, shard), 64);
}

TEST(MoeReferenceTest, BadShardsAndCallsAreRejectedByName) {
  StepSpec spec = Spec("tiny", 1);
  spec.shard = Shard{1, 3, 0};
  EXPECT_NE(ValidateStepSpec(spec).message().find("shard.ep"),
            std::string::npos);
  spec.shard = Shard{16, 1, 0};  // 128 / 16 = 8: not whole NVFP4 blocks
  EXPECT_NE(ValidateStepSpec(spec).message().find("shard.tp"),
            std::string::npos);
  spec.shard = Shard{2, 2, 4};
  EXPECT_NE(ValidateStepSpec(spec).message().find("shard.rank"),
            std::string::npos);
  spec.shard = Shard{};
  EXPECT_EQ(ValidateMoeCall(spec, 0, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateMoeCall(spec, 4, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateMoeCall(spec, 1, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateMoeCall(spec, 3, 1).ok());
}

// tiny, tp 1: gate_up [256, 256] -> 32768 code + 4096 scale bytes; down
// [256, 128] -> 16384 + 2048. One expert: 55296 bytes.
TEST(MoeReferenceTest, BytesByHand) {
  const StepSpec spec = Spec("tiny", 1);
  EXPECT_EQ(ExpertSliceBytes(spec.config, Shard{}), 55296);
  EXPECT_EQ(ExpertSliceBytes(spec.config, Shard{2, 1, 0}), 55296 / 2);
  const std::vector<float> x = MoeLayerInput(spec, 1);
  // Router 32 * 256 * 2 + 9 experts (8 routed + shared) + 2 * 256 * 2.
  EXPECT_EQ(MoeLayerBytes(spec, 1, x.data(), 1), 16384 + 9 * 55296 + 1024);
  // glm5, tp 1: gate_up [4096, 6144] and down [6144, 2048].
  const model::ModelConfig glm5 = *model::PresetByName("glm5");
  EXPECT_EQ(ExpertSliceBytes(glm5, Shard{}),
            12582912 + 1572864 + 6291456 + 786432);
  EXPECT_EQ(ExpertSliceBytes(glm5, Shard{8, 1, 3}), 21233664 / 8);
}

TEST(MoeReferenceTest, BytesCountEachOwnedExpertOnce) {
  const StepSpec full = Spec("tiny", 16, RoutingSpec::Kind::kSkewed);
  const std::vector<float> x = MoeLayerInput(full, 3);
  const std::vector<Route> routes = RouteBatch(full, 3, x.data(), 16);
  for (int rank = 0; rank < 2; ++rank) {
    StepSpec spec = full;
    spec.shard = Shard{1, 2, rank};
    std::set<int> owned;
    for (const Route& r : routes) {
      for (int e : r.experts) {
        if (OwnsExpert(spec.config, spec.shard, e)) owned.insert(e);
      }
    }
    const int64_t experts = static_cast<int64_t>(owned.size()) + (rank == 0);
    EXPECT_EQ(MoeLayerBytes(spec, 3, x.data(), 16),
              16384 + experts * 55296 + 2 * 16 * 256 * 2)
        << rank;
  }
}

TEST(MoeReferenceTest, LayerInputIsNormedBf16AndDeterministic) {
  const StepSpec spec = Spec("tiny", 2);
  const std::vector<float> x = MoeLayerInput(spec, 1);
  ASSERT_EQ(x.size(), 512u);
  EXPECT_EQ(x, MoeLayerInput(spec, 1));
  EXPECT_NE(x, MoeLayerInput(spec, 2));
  double mean_square = 0.0;
  for (int i = 0; i < 256; ++i) mean_square += double{x[i]} * x[i];
  EXPECT_NEAR(mean_square / 256, 1.0, 0.05);  // gammas are 1 +- 0.1
  for (float v : x) EXPECT_EQ(RoundToBf16(v), v);
  EXPECT_NE(std::vector<float>(x.begin(), x.begin() + 256),
            std::vector<float>(x.begin() + 256, x.end()));
}

// One MoE layer at the real GLM-5 dims: 8 routed experts + the shared one,
// 9 x 37.7 M NVFP4 weights from the hash. About 1-3 s on one core at -O2.
TEST(MoeReferenceTest, OneGlm5MoeLayerRuns) {
  const StepSpec spec = Spec("glm5", 1);
  const int layer = spec.config.num_dense_layers;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> y = RunReference(spec, layer, x);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  RecordProperty("glm5_moe_layer_seconds", std::to_string(seconds));
  std::printf("glm5 MoE layer, batch 1: %.2f s\n", seconds);
  ASSERT_EQ(y.size(), 6144u);
  double mean_square = 0.0;
  for (float v : y) {
    ASSERT_TRUE(std::isfinite(v));
    mean_square += double{v} * v;
  }
  EXPECT_GT(mean_square / 6144, 1e-4);
  EXPECT_LT(mean_square / 6144, 1e2);
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace moetune::ref
