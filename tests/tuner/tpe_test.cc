#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/replay.h"
#include "tuner/spec.h"
#include "tuner/tpe_strategy.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;
using testing::Finish;

// 8 points in grid order: cpu_reference then cpu_blocked 4x64, each with
// (tp, ep) = (1,1) (1,2) (2,1) (2,2).
v1::SweepSpec EightSpec() {
  v1::SweepSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        workload {
          model_preset: "tiny"
          batch_sizes: 1
          context_lengths: 64
          region: MOE_LAYER
        }
        space {
          moe_backends: "cpu_reference"
          moe_backends: "cpu_blocked"
          tiles { block_n: 4 block_k: 64 }
          tp: 1
          tp: 2
          ep: 1
          ep: 2
        }
        strategy { kind: TPE initial_random: 3 }
        measurement { iterations: 5 }
      )pb",
      &spec));
  return spec;
}

// Three DONE trials: cpu_blocked (1,1) 10 us, cpu_reference (1,1) 40 us,
// cpu_reference (2,1) 30 us. Good = {blocked (1,1)}, bad = the two others.
std::vector<v1::Trial> ThreeDone(const std::vector<v1::Trial>& grid) {
  std::vector<v1::Trial> history = {grid[4], grid[0], grid[2]};
  Finish(history[0], 1, 10);
  Finish(history[1], 2, 40);
  Finish(history[2], 3, 30);
  for (v1::Trial& t : history) t.set_proposal_key(ProposalKey(t));
  return history;
}

TEST(TpeTest, ScoresByHand) {
  const v1::SweepSpec spec = WithDefaults(EightSpec());
  const std::vector<v1::Trial> grid = *ExpandSweep(spec);
  ASSERT_EQ(grid.size(), 8u);
  const std::vector<v1::Trial> history = ThreeDone(grid);
  std::set<std::string> keys;
  WorkloadSearch search;
  search.points = grid;
  for (int i = 0; i < 8; ++i) {
    search.point_index[ConfigKey(grid[i].config())] = i;
  }
  search.keys = &keys;
  for (const v1::Trial& t : history) search.trials.push_back(&t);
  // Per dimension l/g with add-one smoothing (tile and graph have one value
  // per backend: factor 1):
  //   backend: blocked (2/3)/(1/4) = 8/3, reference (1/3)/(3/4) = 4/9
  //   tp:      1: (2/3)/(2/4) = 4/3,      2: (1/3)/(2/4) = 2/3
  //   ep:      1: (2/3)/(3/4) = 8/9,      2: (1/3)/(1/4) = 4/3
  const std::vector<double> expected = {
      4.0 / 9 * 4 / 3 * 8 / 9, 4.0 / 9 * 4 / 3 * 4 / 3, 4.0 / 9 * 2 / 3 * 8 / 9,
      4.0 / 9 * 2 / 3 * 4 / 3, 8.0 / 3 * 4 / 3 * 8 / 9, 8.0 / 3 * 4 / 3 * 4 / 3,
      8.0 / 3 * 2 / 3 * 8 / 9, 8.0 / 3 * 2 / 3 * 4 / 3};
  const std::vector<double> scores = TpeScores(search);
  ASSERT_EQ(scores.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(std::exp(scores[i]), expected[i], 1e-12) << "point " << i;
  }
}

TEST(TpeTest, ProposesTheBestScoresTwoAtATime) {
  const v1::SweepSpec spec = EightSpec();
  const std::vector<v1::Trial> grid = *ExpandSweep(spec);
  TpeStrategy tpe;
  // Untried scores: blocked (1,2) 128/27, blocked (2,2) 64/27, blocked
  // (2,1) 128/81, ...
  const std::vector<v1::Trial> batch = *tpe.Propose(spec, ThreeDone(grid));
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(ConfigKey(batch[0].config()), "cpu_blocked|4x64|1|2|0");
  EXPECT_EQ(ConfigKey(batch[1].config()), "cpu_blocked|4x64|2|2|0");
  // With one of them in flight, one more.
  std::vector<v1::Trial> history = ThreeDone(grid);
  history.push_back(batch[0]);
  const std::vector<v1::Trial> next = *tpe.Propose(spec, history);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(ConfigKey(next[0].config()), "cpu_blocked|4x64|2|2|0");
}

TEST(TpeTest, InitialRandomFirstThenWaitsForResults) {
  const v1::SweepSpec spec = EightSpec();
  TpeStrategy tpe;
  const std::vector<v1::Trial> first = *tpe.Propose(spec, {});
  ASSERT_EQ(first.size(), 3u);                     // initial_random: 3
  EXPECT_TRUE(tpe.Propose(spec, first)->empty());  // all three in flight
}

TEST(TpeTest, DefaultInitialRandom) {
  WorkloadSearch search;
  search.points.resize(36);
  search.trial_share = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(InitialRandom(search), 3);  // ceil(36 / 12)
  search.points.resize(500);
  EXPECT_EQ(InitialRandom(search), 8);
  search.trial_share = 9;
  EXPECT_EQ(InitialRandom(search), 3);  // a third of 9
  search.knobs.initial_random = 5;
  EXPECT_EQ(InitialRandom(search), 5);
}

// On the recorded sweep, with half the grid as budget, the trials TPE picks
// after its random start are faster than random search's trials.
TEST(TpeTest, ConcentratesOnTheFastRegion) {
  absl::StatusOr<ReplayOracle> oracle =
      ReplayOracle::FromJsonFile(testing::RecordedPath());
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  v1::SweepSpec spec = *SpecFromRecording(oracle->recorded());
  spec.mutable_strategy()->set_max_trials(36);
  // Rank percentile of every recorded DONE config in its workload (0 =
  // fastest); failed configs count as 1.
  std::map<std::string, std::vector<double>> medians;
  for (const v1::Trial& t : oracle->recorded().trials()) {
    auto m = oracle->TrueMedianUs(t.workload_hash(), t.config());
    if (m) medians[t.workload_hash()].push_back(*m);
  }
  for (auto& [w, list] : medians) std::sort(list.begin(), list.end());
  auto percentile = [&](const v1::Trial& t) {
    auto m = oracle->TrueMedianUs(t.workload_hash(), t.config());
    if (!m) return 1.0;
    const auto& list = medians[t.workload_hash()];
    return static_cast<double>(std::lower_bound(list.begin(), list.end(), *m) -
                               list.begin()) /
           list.size();
  };
  double tpe_sum = 0, random_sum = 0;
  int tpe_n = 0, random_n = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    spec.mutable_strategy()->set_seed(seed);
    for (auto kind : {v1::Strategy::TPE, v1::Strategy::RANDOM}) {
      spec.mutable_strategy()->set_kind(kind);
      std::unique_ptr<Strategy> strategy = *MakeStrategy(spec.strategy());
      absl::StatusOr<ReplayRun> run = RunReplay(spec, *strategy, *oracle, seed);
      ASSERT_TRUE(run.ok()) << run.status();
      // The first 3 trials of each workload are random for both.
      std::map<std::string, int> seen;
      for (const v1::Trial& t : run->trials) {
        if (++seen[t.workload_hash()] <= 3) continue;
        (kind == v1::Strategy::TPE ? tpe_sum : random_sum) += percentile(t);
        ++(kind == v1::Strategy::TPE ? tpe_n : random_n);
      }
    }
  }
  const double tpe_mean = tpe_sum / tpe_n;
  const double random_mean = random_sum / random_n;
  std::cout << "mean rank percentile after the random start: tpe " << tpe_mean
            << ", random " << random_mean << "\n";
  // Measured: tpe 0.572, random 0.625 (0 = the fastest config). A modest
  // lead: half of this grid's budget is a handful of trials per dimension
  // value, and a third of the grid fails (tiles that do not fit at tp 2/4).
  EXPECT_LT(tpe_mean, random_mean - 0.03);
}

}  // namespace
}  // namespace moetune::tuner
