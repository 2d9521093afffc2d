#include "tuner/strategy.h"

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/grid_strategy.h"
#include "tuner/random_strategy.h"
#include "tuner/replay.h"
#include "tuner/search.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

using testing::Drive;
using testing::Driven;
using ::testing::ElementsAre;
using testing::Finish;
using testing::ProposeFor;
using testing::TinyLayerSpec;

// 10 points per workload: cpu_reference x 4 (tp, ep), cpu_blocked 4x64 x 4
// (tp, ep) and 8x128 x 2 (tp 1 only: on tiny moe_intermediate / tp is 128 at
// tp 1 and 64 at tp 2, which block_k 128 does not divide).
v1::SweepSpec SmallSpec(const std::string& extra = "") {
  return TinyLayerSpec(R"pb(
                         space {
                           moe_backends: "cpu_reference"
                           moe_backends: "cpu_blocked"
                           tiles { block_n: 4 block_k: 64 }
                           tiles { block_n: 8 block_k: 128 }
                           tp: 1
                           tp: 2
                           ep: 1
                           ep: 2
                         }
                         measurement { iterations: 9 }
                       )pb" +
                       extra);
}

// Hand-made timing: 1000 us / (tp * ep), x3 for cpu_reference, x0.9 for the
// 8x128 tile. Best: cpu_blocked 4x64 tp2 ep2 (250 us), then 8x128 tp1 ep2
// (450 us; 8x128 has no tp 2 point), ahead of 4x64 tp1 ep2 / tp2 ep1 (500).
double HandMedian(const v1::TrialConfig& c) {
  double us = 1000.0 / (c.tp() * c.ep());
  if (c.moe_backend() == "cpu_reference") us *= 3;
  if (c.tile().block_n() == 8) us *= 0.9;
  return us;
}

void HandFinish(v1::Trial& trial, int64_t id) {
  Finish(trial, id, HandMedian(trial.config()));
}

std::vector<std::string> Keys(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> keys;
  for (const v1::Trial& t : trials) keys.push_back(t.proposal_key());
  return keys;
}

std::set<std::string> KeySet(const std::vector<v1::Trial>& trials) {
  const std::vector<std::string> keys = Keys(trials);
  return {keys.begin(), keys.end()};
}

TEST(MakeStrategyTest, EveryKind) {
  const std::map<v1::Strategy::Kind, std::string> names = {
      {v1::Strategy::KIND_UNSPECIFIED, "grid"},
      {v1::Strategy::GRID, "grid"},
      {v1::Strategy::RANDOM, "random"},
      {v1::Strategy::SUCCESSIVE_HALVING, "successive_halving"},
      {v1::Strategy::TPE, "tpe"}};
  for (const auto& [kind, name] : names) {
    v1::Strategy strategy;
    strategy.set_kind(kind);
    absl::StatusOr<std::unique_ptr<Strategy>> made = MakeStrategy(strategy);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_EQ((*made)->name(), name);
  }
}

TEST(MakeStrategyTest, UnknownKind) {
  v1::Strategy kind;
  kind.set_kind(static_cast<v1::Strategy::Kind>(42));
  const absl::StatusOr<std::unique_ptr<Strategy>> strategy = MakeStrategy(kind);
  EXPECT_EQ(strategy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(strategy.status().message(),
            "strategy.kind: 42 is not allowed; allowed: GRID, RANDOM, "
            "SUCCESSIVE_HALVING, TPE");
}

TEST(ProposalKeyTest, ByHand) {
  v1::Trial trial;
  trial.set_workload_hash("abc");
  trial.mutable_config()->set_moe_backend("cpu_blocked");
  trial.mutable_config()->mutable_tile()->set_block_n(4);
  trial.mutable_config()->mutable_tile()->set_block_k(64);
  trial.mutable_config()->set_tp(2);
  trial.mutable_config()->set_ep(4);
  trial.set_rung(1);
  EXPECT_EQ(ProposalKey(trial), "abc|cpu_blocked|4x64|2|4|0|1|0");
  trial.mutable_config()->clear_tile();
  trial.mutable_config()->set_cuda_graph(true);
  trial.set_rung(0);
  trial.set_confirm_round(2);
  EXPECT_EQ(ProposalKey(trial), "abc|cpu_blocked|-|2|4|1|0|2");
  EXPECT_EQ(ConfigKey(trial.config()), "cpu_blocked|-|2|4|1");
}

TEST(GridStrategyTest, WholeGridFirstThenNothing) {
  const v1::SweepSpec spec = SmallSpec();
  GridStrategy grid;
  absl::StatusOr<std::vector<v1::Trial>> first = ProposeFor(grid, spec, {});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::vector<v1::Trial>> expanded = testing::Expand(spec);
  ASSERT_TRUE(expanded.ok());
  ASSERT_EQ(first->size(), 10u);
  for (size_t i = 0; i < first->size(); ++i) {
    v1::Trial expected = (*expanded)[i];
    expected.set_proposal_key(ProposalKey(expected));
    EXPECT_EQ((*first)[i].SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ((*first)[i].state(), v1::QUEUED);
    EXPECT_EQ((*first)[i].measurement().iterations(), 9);
  }
  // Queued or finished, the grid adds nothing more (no confirmation asked).
  EXPECT_TRUE(ProposeFor(grid, spec, *first)->empty());
  const Driven driven = Drive(grid, spec, HandFinish);
  EXPECT_EQ(driven.batches.size(), 1u);
  EXPECT_EQ(driven.trials.size(), 10u);
}

// The scheduler reads a sweep's history only at its end when the strategy
// says the first batch is all: that must hold whenever it says so.
TEST(ProposesAllAtOnceTest, TrueOnlyWhenOneBatchIsTheWholeSweep) {
  struct Case {
    std::string extra;
    bool all_at_once;
  };
  const std::vector<Case> cases = {
      {"", true},
      {"strategy { max_trials: 5 }", true},
      {"strategy { kind: RANDOM max_trials: 7 }", true},
      {"strategy { confirm_top_k: 2 }", false},
      {"strategy { max_gpu_seconds: 0.01 }", false},
      {"strategy { kind: RANDOM max_gpu_seconds: 0.01 }", false},
      {"strategy { kind: SUCCESSIVE_HALVING }", false},
      {"strategy { kind: TPE max_trials: 6 }", false},
  };
  for (const Case& c : cases) {
    const v1::SweepSpec spec = SmallSpec(c.extra);
    auto plan = SweepPlan::Create(spec);
    ASSERT_TRUE(plan.ok()) << c.extra << ": " << plan.status();
    auto strategy = MakeStrategy(spec.strategy());
    ASSERT_TRUE(strategy.ok());
    EXPECT_EQ((*strategy)->ProposesAllAtOnce(**plan), c.all_at_once) << c.extra;
    if (c.all_at_once) {
      EXPECT_EQ(Drive(**strategy, spec, HandFinish).batches.size(), 1u)
          << c.extra;
    }
  }
}

TEST(GridStrategyTest, MaxTrialsIsSplitBetweenWorkloads) {
  v1::SweepSpec spec = SmallSpec("strategy { max_trials: 5 }");
  spec.mutable_workload()->add_batch_sizes(8);
  GridStrategy grid;
  absl::StatusOr<std::vector<v1::Trial>> first = ProposeFor(grid, spec, {});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 5u);  // 3 for the first workload, 2 for the next
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*first)[i].workload().batch_size(), i < 3 ? 1 : 8);
  }
}

TEST(GridStrategyTest, BadSpecIsAnError) {
  GridStrategy grid;
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      ProposeFor(grid, v1::SweepSpec(), {});
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trials.status().message()),
              ::testing::StartsWith("workload.model_preset:"));
}

std::string Short(const v1::Trial& t) {
  return ConfigKey(t.config()) + "#" + std::to_string(t.confirm_round());
}

TEST(ConfirmationTest, InterleavedRoundsOfTheTopK) {
  const v1::SweepSpec spec =
      SmallSpec("strategy { confirm_top_k: 2 confirm_rounds: 3 }");
  GridStrategy grid;
  const Driven driven = Drive(grid, spec, HandFinish);
  ASSERT_EQ(driven.batches.size(), 2u);
  std::vector<std::string> confirm;
  for (const v1::Trial& t : driven.batches[1]) {
    confirm.push_back(Short(t));
    EXPECT_EQ(t.rung(), 0);
    EXPECT_EQ(t.measurement().iterations(), 9);
  }
  EXPECT_THAT(
      confirm,
      ElementsAre("cpu_blocked|4x64|2|2|0#1", "cpu_blocked|8x128|1|2|0#1",
                  "cpu_blocked|4x64|2|2|0#2", "cpu_blocked|8x128|1|2|0#2",
                  "cpu_blocked|4x64|2|2|0#3", "cpu_blocked|8x128|1|2|0#3"));
}

TEST(ConfirmationTest, NotWhileSomethingIsInFlight) {
  const v1::SweepSpec spec = SmallSpec("strategy { confirm_top_k: 2 }");
  GridStrategy grid;
  std::vector<v1::Trial> history = *ProposeFor(grid, spec, {});
  for (size_t i = 0; i + 1 < history.size(); ++i) HandFinish(history[i], i + 1);
  EXPECT_TRUE(ProposeFor(grid, spec, history)->empty());  // one still queued
  HandFinish(history.back(), 10);
  EXPECT_EQ(ProposeFor(grid, spec, history)->size(), 4u);  // 2 configs x 2
}

TEST(ConfirmationTest, HeldBackFromTheTrialBudget) {
  const v1::SweepSpec spec = SmallSpec(
      "strategy { max_trials: 10 confirm_top_k: 2 confirm_rounds: 2 }");
  GridStrategy grid;
  const Driven driven = Drive(grid, spec, HandFinish);
  ASSERT_EQ(driven.batches.size(), 2u);
  EXPECT_EQ(driven.batches[0].size(), 6u);  // 10 - 2 x 2 held back
  EXPECT_EQ(driven.batches[1].size(), 4u);
  EXPECT_EQ(driven.trials.size(), 10u);
}

TEST(RandomStrategyTest, SeededPermutationOfTheGrid) {
  v1::SweepSpec spec = SmallSpec("strategy { kind: RANDOM seed: 7 }");
  RandomStrategy random;
  const std::vector<v1::Trial> a = *ProposeFor(random, spec, {});
  const std::vector<v1::Trial> again = *ProposeFor(random, spec, {});
  EXPECT_EQ(Keys(a), Keys(again));
  ASSERT_EQ(a.size(), 10u);
  GridStrategy grid_strategy;
  const std::vector<v1::Trial> grid = *ProposeFor(grid_strategy, spec, {});
  EXPECT_EQ(KeySet(a), KeySet(grid));
  EXPECT_NE(Keys(a), Keys(grid));
  spec.mutable_strategy()->set_seed(8);
  EXPECT_NE(Keys(*ProposeFor(random, spec, {})), Keys(a));
  // max_trials takes the head of the same order.
  spec.mutable_strategy()->set_seed(7);
  spec.mutable_strategy()->set_max_trials(5);
  const std::vector<v1::Trial> head = *ProposeFor(random, spec, {});
  ASSERT_EQ(head.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(head[i].proposal_key(), a[i].proposal_key());
  EXPECT_TRUE(ProposeFor(random, spec, head)->empty());
}

TEST(RandomStrategyTest, GpuSecondBudgetKeepsFourInFlightAndStops) {
  // Each sample costs HandMedian us, 9 samples a trial: the whole grid costs
  // 9 x 10350 us = 0.093 s (cpu_reference 6750, 4x64 2250, 8x128 at tp 1
  // only 1350). Budget 0.06 s.
  const v1::SweepSpec spec =
      SmallSpec("strategy { kind: RANDOM seed: 3 max_gpu_seconds: 0.06 }");
  RandomStrategy random;
  const Driven driven = Drive(random, spec, HandFinish);
  ASSERT_GE(driven.batches.size(), 1u);
  EXPECT_EQ(driven.batches[0].size(), 4u);  // nothing known: 4 in flight
  for (const auto& batch : driven.batches) EXPECT_LE(batch.size(), 4u);
  // driven.batches hold the proposals as proposed; driven.trials finished.
  const size_t last = driven.trials.size() - driven.batches.back().size();
  double spent = 0, before_last = 0;
  for (size_t i = 0; i < driven.trials.size(); ++i) {
    if (i == last) before_last = spent;
    spent += TrialGpuSeconds(driven.trials[i]);
  }
  EXPECT_LT(before_last, 0.06);  // the last batch was proposed under budget
  EXPECT_LT(driven.trials.size(), 10u);
  EXPECT_GE(spent, 0.03);
}

// Every strategy against the recorded CPU sweep.
class RecordedTest : public ::testing::TestWithParam<v1::Strategy::Kind> {
 protected:
  void SetUp() override {
    absl::StatusOr<ReplayOracle> oracle =
        ReplayOracle::FromJsonFile(testing::RecordedPath());
    ASSERT_TRUE(oracle.ok()) << oracle.status();
    oracle_ = std::make_unique<ReplayOracle>(*std::move(oracle));
    spec_ = *SpecFromRecording(oracle_->recorded());
    spec_.mutable_strategy()->set_kind(GetParam());
    spec_.mutable_strategy()->set_seed(11);
  }
  Driven Run(const v1::SweepSpec& spec) {
    std::unique_ptr<Strategy> strategy = *MakeStrategy(spec.strategy());
    return Drive(*strategy, spec, [&](v1::Trial& t, int64_t id) {
      t.set_trial_id(id);
      *t.mutable_result() = oracle_->Simulate(t, 5);
      t.set_state(t.result().outcome());
    });
  }
  std::unique_ptr<ReplayOracle> oracle_;
  v1::SweepSpec spec_;
};

TEST_P(RecordedTest, DeterministicUniqueAndWithinTrialBudget) {
  spec_.mutable_strategy()->set_max_trials(30);  // 15 per workload
  const Driven a = Run(spec_);
  const Driven b = Run(spec_);
  ASSERT_EQ(a.trials.size(), b.trials.size());
  for (size_t i = 0; i < a.trials.size(); ++i) {
    EXPECT_EQ(a.trials[i].SerializeAsString(), b.trials[i].SerializeAsString());
  }
  EXPECT_LE(a.trials.size(), 30u);
  EXPECT_GE(a.trials.size(), 2u);
  std::set<std::string> keys;
  for (const v1::Trial& t : a.trials) {
    EXPECT_TRUE(keys.insert(ProposalKey(t)).second) << ProposalKey(t);
    EXPECT_EQ(t.proposal_key(), ProposalKey(t));
  }
}

TEST_P(RecordedTest, ResumeFromAnyPrefixContinuesTheSame) {
  spec_.mutable_strategy()->set_confirm_top_k(2);
  const Driven run = Run(spec_);
  ASSERT_GE(run.batches.size(), 2u);
  for (size_t r = 0; r < run.batches.size(); ++r) {
    // A coordinator restarted after round r: a fresh strategy, the history.
    std::unique_ptr<Strategy> fresh = *MakeStrategy(spec_.strategy());
    EXPECT_EQ(Keys(*ProposeFor(*fresh, spec_, run.histories[r])),
              Keys(run.batches[r]))
        << "round " << r;
    // Restarted while round r was still queued: never a key twice.
    std::vector<v1::Trial> queued = run.histories[r];
    queued.insert(queued.end(), run.batches[r].begin(), run.batches[r].end());
    const std::set<std::string> known = KeySet(queued);
    // Held in a named value: a range-for over *temporary would dangle.
    const std::vector<v1::Trial> next = *ProposeFor(*fresh, spec_, queued);
    for (const v1::Trial& t : next) {
      EXPECT_EQ(known.count(t.proposal_key()), 0u) << t.proposal_key();
    }
  }
  // The end: a finished history proposes nothing.
  std::unique_ptr<Strategy> fresh = *MakeStrategy(spec_.strategy());
  EXPECT_TRUE(ProposeFor(*fresh, spec_, run.trials)->empty());
}

TEST_P(RecordedTest, GpuSecondBudget) {
  // The grid costs about 1 GPU-second per workload in this recording; 0.2
  // each. Trials are proposed only while the projected spend is under the
  // share; what is in flight then may overshoot it (the first, blind batch
  // most: four cpu_reference trials for the grid).
  spec_.mutable_strategy()->set_max_gpu_seconds(0.4);
  const Driven run = Run(spec_);
  std::map<std::string, double> spent;
  for (size_t b = 0; b < run.batches.size(); ++b) {
    for (const v1::Trial& t : run.histories[b]) {
      spent[t.workload_hash()] += TrialGpuSeconds(t);
    }
    for (const v1::Trial& t : run.batches[b]) {
      EXPECT_LT(spent[t.workload_hash()], 0.2) << "batch " << b;
    }
    spent.clear();
  }
  // The grid is 48 points: the recording's 72 trials less its 24 FAILED
  // tiles, which the space leaves out. The budget stops short of timing
  // all of them in full. Halving screens the whole grid; TPE's cheap screens
  // (3 iterations) may outnumber the grid, so count the full-length trials.
  size_t full_length = 0;
  for (const v1::Trial& t : run.trials) {
    if (t.measurement().iterations() == spec_.measurement().iterations()) {
      ++full_length;
    }
  }
  if (GetParam() == v1::Strategy::GRID || GetParam() == v1::Strategy::RANDOM) {
    EXPECT_LT(run.trials.size(), 48u);
  }
  if (GetParam() != v1::Strategy::SUCCESSIVE_HALVING) {
    EXPECT_LT(full_length, 48u);
  }
  double total = 0;
  for (const v1::Trial& t : run.trials) total += TrialGpuSeconds(t);
  EXPECT_GE(total, 0.2);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, RecordedTest,
    ::testing::Values(v1::Strategy::GRID, v1::Strategy::RANDOM,
                      v1::Strategy::SUCCESSIVE_HALVING, v1::Strategy::TPE),
    [](const ::testing::TestParamInfo<v1::Strategy::Kind>& info) {
      return v1::Strategy::Kind_Name(info.param);
    });

}  // namespace
}  // namespace moetune::tuner
