#include "tuner/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/tile_shape.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/config_key.h"
#include "tuner/grid_strategy.h"
#include "tuner/search.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ReplayOracle> oracle =
        ReplayOracle::FromJsonFile(testing::RecordedPath());
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    oracle_ = std::make_unique<ReplayOracle>(*std::move(oracle));
  }
  // The recorded trial with this batch size and config key.
  const v1::Trial& Recorded(int batch, const std::string& config_key) {
    for (const v1::Trial& t : oracle_->recorded().trials()) {
      if (t.workload().batch_size() == batch &&
          ConfigKey(t.config()) == config_key) {
        return t;
      }
    }
    ADD_FAILURE() << "not recorded: " << config_key;
    return oracle_->recorded().trials(0);
  }
  std::unique_ptr<ReplayOracle> oracle_;
};

// The recording holds tiles that cannot run, which the space leaves out:
// per workload (tiny, hidden 256, moe_intermediate 128) it holds
// cpu_reference x tp {1, 2, 4} x ep {1, 2, 4, 8} (12), and cpu_blocked 4x64
// and 8x128 x the same 12 (tp, ep). moe_intermediate / tp is 128, 64, 32, so
// 4x64 cannot run at tp 4 and 8x128 only runs at tp 1: 4 + 8 = 12 FAILED
// per workload. The grid is the 24 others, in its own order (a backend's
// layouts vary slower than its tiles; the recording's order differs).
TEST_F(ReplayTest, TheRecordingIsAGridOfTwoWorkloads) {
  EXPECT_EQ(oracle_->recorded().trials_size(), 72);
  std::vector<const v1::Trial*> runnable;
  for (const v1::Trial& t : oracle_->recorded().trials()) {
    if (t.state() == v1::FAILED) {
      EXPECT_THAT(t.result().reason(),
                  ::testing::HasSubstr("kernel cannot do this shape"))
          << ConfigKey(t.config());
    } else {
      EXPECT_EQ(t.state(), v1::DONE) << ConfigKey(t.config());
      runnable.push_back(&t);
    }
  }
  ASSERT_EQ(runnable.size(), 48u);  // 72 - 2 workloads x 12 FAILED
  const absl::StatusOr<v1::SweepSpec> spec =
      SpecFromRecording(oracle_->recorded());
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<v1::Trial> grid = *testing::Expand(*spec);
  ASSERT_EQ(grid.size(), 48u);
  auto keys = [](const std::vector<const v1::Trial*>& trials) {
    std::multiset<std::string> out;
    for (const v1::Trial* t : trials) {
      out.insert(t->workload_hash() + " " + ConfigKey(t->config()));
    }
    return out;
  };
  std::vector<const v1::Trial*> planned;
  for (const v1::Trial& t : grid) planned.push_back(&t);
  EXPECT_EQ(keys(planned), keys(runnable));
  EXPECT_EQ(spec->measurement().iterations(), 20);
}

TEST_F(ReplayTest, SimulateDrawsFromTheRecordedSamples) {
  const v1::Trial& recorded = Recorded(1, "cpu_blocked|4x64|2|8|0");
  v1::Trial proposed = recorded;
  proposed.clear_result();
  proposed.set_state(v1::QUEUED);
  proposed.set_trial_id(77);
  proposed.mutable_measurement()->set_iterations(50);
  const v1::TrialResult a = oracle_->Simulate(proposed, 3);
  EXPECT_EQ(a.outcome(), v1::DONE);
  EXPECT_EQ(a.trial_id(), 77);
  ASSERT_EQ(a.samples_us_size(), 50);
  const std::set<double> pool(recorded.result().samples_us().begin(),
                              recorded.result().samples_us().end());
  for (double s : a.samples_us()) EXPECT_EQ(pool.count(s), 1u) << s;
  const std::vector<double> drawn(a.samples_us().begin(), a.samples_us().end());
  EXPECT_DOUBLE_EQ(a.stats().median_us(), stats::Summarize(drawn).median_us());
  EXPECT_EQ(a.fingerprint().hash(), recorded.result().fingerprint().hash());
  // Same seed, same draw; another seed, another draw.
  EXPECT_EQ(oracle_->Simulate(proposed, 3).SerializeAsString(),
            a.SerializeAsString());
  EXPECT_NE(oracle_->Simulate(proposed, 4).SerializeAsString(),
            a.SerializeAsString());
  // The true median is the recorded one (the same 20 samples).
  EXPECT_DOUBLE_EQ(
      *oracle_->TrueMedianUs(recorded.workload_hash(), recorded.config()),
      recorded.result().stats().median_us());
}

TEST_F(ReplayTest, RecordedFailuresAndUnknownConfigs) {
  v1::Trial failed = Recorded(1, "cpu_blocked|8x128|2|1|0");
  ASSERT_EQ(failed.state(), v1::FAILED);
  failed.clear_result();
  const v1::TrialResult r = oracle_->Simulate(failed, 1);
  EXPECT_EQ(r.outcome(), v1::FAILED);
  EXPECT_THAT(r.reason(), ::testing::HasSubstr("kernel cannot do this shape"));
  EXPECT_EQ(r.samples_us_size(), 0);
  EXPECT_FALSE(oracle_->TrueMedianUs(failed.workload_hash(), failed.config()));
  v1::Trial unknown = failed;
  unknown.mutable_config()->set_tp(8);
  const v1::TrialResult u = oracle_->Simulate(unknown, 1);
  EXPECT_EQ(u.outcome(), v1::UNAVAILABLE);
  EXPECT_EQ(u.reason(), "replay: config not recorded");
}

TEST_F(ReplayTest, GridReplayIsDeterministicAndFindsTheRecordedBest) {
  const v1::SweepSpec spec = *SpecFromRecording(oracle_->recorded());
  GridStrategy grid;
  const absl::StatusOr<ReplayRun> a = RunReplay(spec, grid, *oracle_, 9);
  const absl::StatusOr<ReplayRun> b = RunReplay(spec, grid, *oracle_, 9);
  ASSERT_TRUE(a.ok()) << a.status();
  // The grid is the recording's 48 runnable trials (see above): the replay
  // never proposes a tile the recording saw fail.
  ASSERT_EQ(a->trials.size(), 48u);
  ASSERT_EQ(b->trials.size(), 48u);
  double seconds = 0;
  for (size_t i = 0; i < 48; ++i) {
    EXPECT_EQ(a->trials[i].SerializeAsString(),
              b->trials[i].SerializeAsString());
    EXPECT_EQ(a->trials[i].trial_id(), static_cast<int64_t>(i) + 1);
    EXPECT_EQ(a->trials[i].state(), v1::DONE) << i;
    seconds += TrialGpuSeconds(a->trials[i]);
  }
  EXPECT_DOUBLE_EQ(a->gpu_seconds, seconds);
  EXPECT_EQ(a->rounds, 1);
  ASSERT_EQ(a->pick.workloads_size(), 2);
  ASSERT_EQ(a->pick_true_median_us.size(), 2u);
  // The recording's fastest config of both workloads: cpu_blocked 4x64 tp2
  // ep8 (106 us and 400 us), far ahead of the runners-up.
  for (int w = 0; w < 2; ++w) {
    const v1::BestForWorkload& best = a->pick.workloads(w);
    EXPECT_EQ(ConfigKey(best.best().config()), "cpu_blocked|4x64|2|8|0");
    EXPECT_DOUBLE_EQ(
        a->pick_true_median_us[w],
        *oracle_->TrueMedianUs(best.workload_hash(), best.best().config()));
  }
}

// A grid replay of the recorded sweep tests/data/`file`: it proposes exactly
// the recorded trials; the winner of each batch as backend|tile.
std::map<int, std::string> GridReplayWinners(const std::string& file) {
  std::map<int, std::string> winner;
  const absl::StatusOr<ReplayOracle> oracle = ReplayOracle::FromJsonFile(
      std::string(MOETUNE_SOURCE_DIR) + "/tests/data/" + file);
  EXPECT_TRUE(oracle.ok()) << oracle.status();
  if (!oracle.ok()) return winner;
  const v1::SweepSpec spec = *SpecFromRecording(oracle->recorded());
  GridStrategy grid;
  const absl::StatusOr<ReplayRun> run = RunReplay(spec, grid, *oracle, 3);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return winner;
  EXPECT_EQ(run->trials.size(),
            static_cast<size_t>(oracle->recorded().trials_size()));
  for (const v1::BestForWorkload& w : run->pick.workloads()) {
    const v1::TrialConfig& c = w.best().config();
    winner[w.best().workload().batch_size()] =
        c.moe_backend() + "|" + TileText(c);
  }
  return winner;
}

// tests/data/recorded_h200_serving_sweep.json: deploy/h200_serving_sweep.json
// on the H200 (kernels/cuda/moe/PERF.md "Serving batches", `moetune results
// --sweep 1 --format json`; glm5 MoE layer, batches 1-512, graph on;
// fused_gemv planned at every batch since it walks 64-token tiles). The
// grid picks the crossovers the sweep found: fused_gemv_fp8 at 1 token,
// fused_gemv at 8 to 64, grouped_wgmma 128x256 from 128 on (fused_gemv
// second at 128).
TEST(ServingReplayTest, TheGridPicksTheRecordedCrossovers) {
  EXPECT_EQ(GridReplayWinners("recorded_h200_serving_sweep.json"),
            (std::map<int, std::string>{{1, "fused_gemv_fp8|128x512"},
                                        {8, "fused_gemv|16x512"},
                                        {32, "fused_gemv|16x512"},
                                        {64, "fused_gemv|16x512"},
                                        {128, "grouped_wgmma|128x256"},
                                        {256, "grouped_wgmma|128x256"},
                                        {512, "grouped_wgmma|128x256"}}));
}

// tests/data/recorded_h200_serving_skewed_sweep.json: deploy/
// h200_serving_skewed_sweep.json on the H200 (kernels/cuda/moe/PERF.md
// "fused_gemv_wgmma", `moetune results --sweep 2 --format json`; glm5 MoE
// layer, Zipf-skewed routing, batches 1-512 with 96 and 192, graph on). The
// grid picks the crossovers the sweep found: fused_gemv_fp8 at 1 token,
// fused_gemv at 8, fused_gemv_wgmma (the hot experts by grouped_wgmma's
// kernel, the rest by fused_gemv's) from 32 to 128, grouped_wgmma from 192
// on.
TEST(ServingReplayTest, TheGridPicksTheSkewedCrossovers) {
  EXPECT_EQ(GridReplayWinners("recorded_h200_serving_skewed_sweep.json"),
            (std::map<int, std::string>{{1, "fused_gemv_fp8|128x512"},
                                        {8, "fused_gemv|16x512"},
                                        {32, "fused_gemv_wgmma|16x512"},
                                        {64, "fused_gemv_wgmma|16x512"},
                                        {96, "fused_gemv_wgmma|16x512"},
                                        {128, "fused_gemv_wgmma|16x512"},
                                        {192, "grouped_wgmma|128x256"},
                                        {256, "grouped_wgmma|128x256"},
                                        {512, "grouped_wgmma|128x256"}}));
}

// tests/data/recorded_h200_serving_stages_sweep.json: deploy/
// h200_serving_stages_sweep.json on the H200 (kernels/cuda/moe/PERF.md
// "Pipeline depth as a tile parameter", `moetune results --format json`;
// glm5 MoE layer, batches 64-512, grouped_wgmma at six tiles, three of them
// with their own ring depth). The recording's space keeps the depths apart
// (every recorded trial proposed again, 28), and the grid picks the
// recorded winners: the budget's depth at 128-512, none of the others.
TEST(ServingReplayTest, TheGridKeepsRingDepthsApart) {
  EXPECT_EQ(GridReplayWinners("recorded_h200_serving_stages_sweep.json"),
            (std::map<int, std::string>{{64, "fused_gemv_wgmma|16x512"},
                                        {128, "grouped_wgmma|128x256"},
                                        {256, "grouped_wgmma|128x256"},
                                        {512, "grouped_wgmma|128x256"}}));
  const absl::StatusOr<ReplayOracle> oracle = ReplayOracle::FromJsonFile(
      std::string(MOETUNE_SOURCE_DIR) +
      "/tests/data/recorded_h200_serving_stages_sweep.json");
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  const v1::SweepSpec spec = *SpecFromRecording(oracle->recorded());
  std::vector<std::string> tiles;
  for (const v1::TileShape& t : spec.space().tiles()) {
    tiles.push_back(backends::TileText(backends::TileOf(t)));
  }
  EXPECT_THAT(tiles, ::testing::UnorderedElementsAre(
                         "16x512", "128x256", "128x128", "256x256", "128x256s2",
                         "128x128s4", "128x256s6"));
}

TEST(ReplayOracleTest, BadInput) {
  EXPECT_EQ(ReplayOracle::FromJson("{\"trials\": 3}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplayOracle::FromJsonFile("/nonexistent/x.json").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SpecFromRecording(v1::QueryTrialsResponse()).status().message(),
            "recorded sweep: trials: none");
}

}  // namespace
}  // namespace moetune::tuner
