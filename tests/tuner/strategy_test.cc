#include "tuner/strategy.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tuner/grid_strategy.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

TEST(MakeStrategyTest, GridForGridAndUnspecified) {
  v1::Strategy kind;
  absl::StatusOr<std::unique_ptr<Strategy>> unspecified = MakeStrategy(kind);
  ASSERT_TRUE(unspecified.ok()) << unspecified.status();
  EXPECT_EQ((*unspecified)->name(), "grid");
  kind.set_kind(v1::Strategy::GRID);
  absl::StatusOr<std::unique_ptr<Strategy>> grid = MakeStrategy(kind);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_NE(dynamic_cast<GridStrategy*>(grid->get()), nullptr);
}

TEST(MakeStrategyTest, UnknownKind) {
  v1::Strategy kind;
  kind.set_kind(static_cast<v1::Strategy::Kind>(42));
  const absl::StatusOr<std::unique_ptr<Strategy>> strategy = MakeStrategy(kind);
  EXPECT_EQ(strategy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(strategy.status().message(),
            "strategy.kind: 42 is not allowed; allowed: GRID");
}

TEST(GridStrategyTest, WholeGridUpFrontNothingOnResults) {
  v1::SweepSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        workload {
          model_preset: "tiny"
          batch_sizes: 1
          batch_sizes: 2
          context_lengths: 64
          region: MOE_LAYER
        }
        space {
          moe_backends: "cpu_blocked"
          moe_backends: "fused_gemv"
          cuda_graph: false
          cuda_graph: true
        }
      )pb",
      &spec));
  GridStrategy grid;
  absl::StatusOr<std::vector<v1::Trial>> trials = grid.InitialTrials(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  absl::StatusOr<std::vector<v1::Trial>> expanded = ExpandSweep(spec);
  ASSERT_TRUE(expanded.ok());
  ASSERT_EQ(trials->size(), 6u);  // 2 workloads x (1 CPU + 2 graph modes)
  for (size_t i = 0; i < trials->size(); ++i) {
    EXPECT_EQ((*trials)[i].SerializeAsString(),
              (*expanded)[i].SerializeAsString());
  }
  v1::Trial finished = trials->front();
  finished.set_state(v1::DONE);
  EXPECT_TRUE(grid.OnResult(finished).empty());
}

TEST(GridStrategyTest, BadSpecIsAnError) {
  GridStrategy grid;
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      grid.InitialTrials(v1::SweepSpec());
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trials.status().message()),
              ::testing::StartsWith("workload.model_preset:"));
}

}  // namespace
}  // namespace moetune::tuner
