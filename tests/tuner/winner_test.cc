#include "tuner/winner.h"

#include <string>
#include <vector>

#include "common/stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;

struct Spec {
  int64_t id;
  std::string workload;
  std::string fingerprint;
  double median, ci_low, ci_high;
  int64_t updated_ms = 1000;
  v1::TrialState state = v1::DONE;
};

v1::Trial MakeTrial(const Spec& s) {
  v1::Trial t;
  t.set_trial_id(s.id);
  t.set_workload_hash(s.workload);
  t.mutable_workload()->set_batch_size(static_cast<int>(s.workload.size()));
  t.set_state(s.state);
  t.set_updated_at_unix_ms(s.updated_ms);
  // A config of its own per trial: trials of one config are pooled.
  t.mutable_config()->set_moe_backend("cpu_blocked");
  t.mutable_config()->set_tp(static_cast<int>(s.id));
  v1::TrialResult& r = *t.mutable_result();
  r.set_trial_id(s.id);
  r.set_outcome(s.state);
  r.mutable_fingerprint()->set_hash(s.fingerprint);
  r.mutable_fingerprint()->set_device_name("dev-" + s.fingerprint);
  r.mutable_stats()->set_samples(20);
  r.mutable_stats()->set_median_us(s.median);
  r.mutable_stats()->set_ci_low_us(s.ci_low);
  r.mutable_stats()->set_ci_high_us(s.ci_high);
  return t;
}

std::vector<v1::Trial> MakeTrials(const std::vector<Spec>& specs) {
  std::vector<v1::Trial> trials;
  for (const Spec& s : specs) trials.push_back(MakeTrial(s));
  return trials;
}

std::vector<int64_t> Tied(const v1::BestForWorkload& b) {
  return {b.tied_trial_ids().begin(), b.tied_trial_ids().end()};
}

TEST(SelectBestTest, ClearWinnerRunnerUpAndMargin) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {1, "w", "fp", 20.0, 19.0, 21.0},
      {2, "w", "fp", 10.0, 9.0, 11.0},
      {3, "w", "fp", 12.5, 11.5, 13.0},
  }));
  ASSERT_EQ(r.workloads_size(), 1);
  const v1::BestForWorkload& b = r.workloads(0);
  EXPECT_EQ(b.workload_hash(), "w");
  EXPECT_EQ(b.best().trial_id(), 2);
  EXPECT_EQ(b.runner_up().trial_id(), 3);
  EXPECT_DOUBLE_EQ(b.margin_us(), 2.5);
  EXPECT_FALSE(b.tie());  // 11.5 > 11
  EXPECT_THAT(Tied(b), ElementsAre(2));
  EXPECT_EQ(b.fingerprint().hash(), "fp");
  EXPECT_EQ(b.fingerprint().device_name(), "dev-fp");
  EXPECT_EQ(b.workload().batch_size(), 1);
  EXPECT_TRUE(r.excluded().empty());
}

TEST(SelectBestTest, OverlappingIntervalsAreTies) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {1, "w", "fp", 10.0, 9.0, 11.0},
      {2, "w", "fp", 10.5, 9.5, 11.5},   // runner-up, overlaps
      {3, "w", "fp", 13.0, 10.8, 15.0},  // third, wide CI reaching the best's
      {4, "w", "fp", 30.0, 29.0, 31.0},  // clearly slower
  }));
  ASSERT_EQ(r.workloads_size(), 1);
  const v1::BestForWorkload& b = r.workloads(0);
  EXPECT_EQ(b.best().trial_id(), 1);
  EXPECT_EQ(b.runner_up().trial_id(), 2);
  EXPECT_TRUE(b.tie());
  EXPECT_DOUBLE_EQ(b.margin_us(), 0.5);
  EXPECT_THAT(Tied(b), ElementsAre(1, 2, 3));
}

TEST(SelectBestTest, EqualMediansBreakOnTrialId) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {7, "w", "fp", 10.0, 9.0, 11.0},
      {5, "w", "fp", 10.0, 9.0, 11.0},
  }));
  ASSERT_EQ(r.workloads_size(), 1);
  EXPECT_EQ(r.workloads(0).best().trial_id(), 5);
  EXPECT_EQ(r.workloads(0).runner_up().trial_id(), 7);
  EXPECT_DOUBLE_EQ(r.workloads(0).margin_us(), 0.0);
  EXPECT_TRUE(r.workloads(0).tie());
}

TEST(SelectBestTest, OnlyDoneTrialsRank) {
  std::vector<v1::Trial> trials = MakeTrials({
      {1, "w", "fp", 1.0, 0.9, 1.1, 1000, v1::INCORRECT},
      {2, "w", "fp", 2.0, 1.9, 2.1, 1000, v1::FAILED},
      {3, "w", "fp", 3.0, 2.9, 3.1, 1000, v1::TIMEOUT},
      {4, "w", "fp", 50.0, 49.0, 51.0},
      {5, "w", "fp", 4.0, 3.9, 4.1},  // state DONE, outcome INCORRECT
      {6, "w", "fp", 5.0, 4.9, 5.1},  // state DONE, no result
      {7, "w", "fp", 60.0, 45.0, 75.0},
  });
  trials[4].mutable_result()->set_outcome(v1::INCORRECT);
  trials[5].clear_result();
  const v1::GetBestResponse r = SelectBest(trials);
  ASSERT_EQ(r.workloads_size(), 1);
  const v1::BestForWorkload& b = r.workloads(0);
  EXPECT_EQ(b.best().trial_id(), 4);
  EXPECT_EQ(b.runner_up().trial_id(), 7);
  EXPECT_DOUBLE_EQ(b.margin_us(), 10.0);
  EXPECT_TRUE(b.tie());
  EXPECT_THAT(Tied(b), ElementsAre(4, 7));  // never 1, 2, 3, 5 or 6
}

TEST(SelectBestTest, NoRankableTrialNoEntry) {
  EXPECT_EQ(SelectBest(MakeTrials({
                           {1, "w", "fp", 1.0, 0.9, 1.1, 1000, v1::INCORRECT},
                           {2, "w", "fp", 2.0, 1.9, 2.1, 1000, v1::QUEUED},
                       }))
                .workloads_size(),
            0);
  EXPECT_EQ(SelectBest({}).workloads_size(), 0);
}

TEST(SelectBestTest, SingleTrialHasNoRunnerUp) {
  const v1::GetBestResponse r =
      SelectBest(MakeTrials({{9, "w", "fp", 10.0, 9.0, 11.0}}));
  ASSERT_EQ(r.workloads_size(), 1);
  EXPECT_EQ(r.workloads(0).best().trial_id(), 9);
  EXPECT_FALSE(r.workloads(0).has_runner_up());
  EXPECT_EQ(r.workloads(0).margin_us(), 0.0);
  EXPECT_FALSE(r.workloads(0).tie());
  EXPECT_THAT(Tied(r.workloads(0)), ElementsAre(9));
}

TEST(SelectBestTest, FingerprintsAreNeverMixed) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {1, "w", "old", 10.0, 9.0, 11.0, 1000},
      {2, "w", "old", 15.0, 14.0, 16.0, 1500},
      {3, "w", "new", 12.0, 11.0, 13.0, 2000},  // slower than 1, other env
  }));
  ASSERT_EQ(r.workloads_size(), 2);
  // Newest fingerprint first.
  const v1::BestForWorkload& fresh = r.workloads(0);
  EXPECT_EQ(fresh.fingerprint().hash(), "new");
  EXPECT_EQ(fresh.best().trial_id(), 3);
  EXPECT_FALSE(fresh.has_runner_up());
  EXPECT_THAT(Tied(fresh), ElementsAre(3));
  const v1::BestForWorkload& stale = r.workloads(1);
  EXPECT_EQ(stale.fingerprint().hash(), "old");
  EXPECT_EQ(stale.best().trial_id(), 1);
  EXPECT_EQ(stale.runner_up().trial_id(), 2);
  EXPECT_DOUBLE_EQ(stale.margin_us(), 5.0);
  EXPECT_FALSE(stale.tie());
  EXPECT_THAT(Tied(stale), ElementsAre(1));
}

TEST(SelectBestTest, NewestIsByLatestTrialOfTheFingerprint) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {1, "w", "a", 10.0, 9.0, 11.0, 5000},
      {2, "w", "b", 10.0, 9.0, 11.0, 4000},
      {3, "w", "b", 11.0, 10.0, 12.0, 6000},
  }));
  ASSERT_EQ(r.workloads_size(), 2);
  EXPECT_EQ(r.workloads(0).fingerprint().hash(), "b");
  EXPECT_EQ(r.workloads(1).fingerprint().hash(), "a");
}

TEST(SelectBestTest, WorkloadsInFirstAppearanceOrder) {
  const v1::GetBestResponse r = SelectBest(MakeTrials({
      {1, "zz", "fp", 10.0, 9.0, 11.0},
      {2, "aaa", "fp", 8.0, 7.0, 9.0},
      {3, "zz", "fp", 9.0, 8.5, 9.5},
  }));
  ASSERT_EQ(r.workloads_size(), 2);
  EXPECT_EQ(r.workloads(0).workload_hash(), "zz");
  EXPECT_EQ(r.workloads(0).best().trial_id(), 3);
  EXPECT_EQ(r.workloads(0).workload().batch_size(), 2);
  EXPECT_TRUE(r.workloads(0).tie());  // [8.5, 9.5] overlaps [9, 11]
  EXPECT_EQ(r.workloads(1).workload_hash(), "aaa");
  EXPECT_EQ(r.workloads(1).best().trial_id(), 2);
}

}  // namespace
}  // namespace moetune::tuner

namespace moetune::tuner {
namespace {

// A DONE trial of config (backend, tp) with raw samples.
v1::Trial Sampled(int64_t id, int tp, std::vector<double> samples, int rung = 0,
                  std::string fingerprint = "fp") {
  v1::Trial t;
  t.set_trial_id(id);
  t.set_workload_hash("w");
  t.set_state(v1::DONE);
  t.set_rung(rung);
  t.set_updated_at_unix_ms(1000);
  t.mutable_config()->set_moe_backend("cpu_blocked");
  t.mutable_config()->set_tp(tp);
  v1::TrialResult& r = *t.mutable_result();
  r.set_outcome(v1::DONE);
  r.mutable_fingerprint()->set_hash(fingerprint);
  r.mutable_samples_us()->Assign(samples.begin(), samples.end());
  *r.mutable_stats() = stats::Summarize(samples);
  return t;
}

TEST(SelectBestPoolingTest, TrialsOfOneConfigArePooled) {
  // Config tp1: trials 3 and 5, samples {10, 11, 12} and {13, 14}: pooled
  // median 12. Config tp2: one trial, median 12.5.
  const v1::GetBestResponse r = SelectBest({
      Sampled(5, 1, {13, 14}),
      Sampled(4, 2, {12, 12.5, 13}),
      Sampled(3, 1, {10, 11, 12}),
  });
  ASSERT_EQ(r.workloads_size(), 1);
  const v1::BestForWorkload& b = r.workloads(0);
  EXPECT_EQ(b.best().trial_id(), 3);  // the config's lowest id stands for it
  EXPECT_EQ(b.best().result().samples_us_size(), 5);
  EXPECT_DOUBLE_EQ(b.best().result().stats().median_us(), 12.0);
  EXPECT_EQ(b.best().result().stats().samples(), 5);
  EXPECT_EQ(b.runner_up().trial_id(), 4);
  EXPECT_DOUBLE_EQ(b.margin_us(), 0.5);
  EXPECT_EQ(DecidedBy(b), kRuleFastest);
}

TEST(SelectBestPoolingTest, ScreeningRungsOnlyWhenNothingElse) {
  // Rung 1 (screening) is faster but a rung-0 trial exists: rung 0 decides.
  const v1::GetBestResponse r = SelectBest({
      Sampled(1, 1, {5, 5, 5}, /*rung=*/1),
      Sampled(2, 2, {50, 50, 50}, /*rung=*/0),
  });
  ASSERT_EQ(r.workloads_size(), 1);
  EXPECT_EQ(r.workloads(0).best().trial_id(), 2);
  EXPECT_FALSE(r.workloads(0).has_runner_up());
  // Only screening trials: the lowest rung present decides, marked so.
  const v1::GetBestResponse s = SelectBest({
      Sampled(1, 1, {9, 9, 9}, /*rung=*/2),
      Sampled(2, 2, {7, 7, 7}, /*rung=*/1),
      Sampled(3, 3, {8, 8, 8}, /*rung=*/1),
  });
  ASSERT_EQ(s.workloads_size(), 1);
  EXPECT_EQ(s.workloads(0).best().trial_id(), 2);
  EXPECT_EQ(s.workloads(0).runner_up().trial_id(), 3);
  EXPECT_EQ(DecidedBy(s.workloads(0)), kRuleScreeningOnly);
}

v1::Trial WithCi(int64_t id, int tp, double median, double lo, double hi,
                 std::string fingerprint = "fp") {
  v1::Trial t = Sampled(id, tp, {}, 0, fingerprint);
  t.mutable_result()->clear_samples_us();
  t.mutable_result()->mutable_stats()->set_median_us(median);
  t.mutable_result()->mutable_stats()->set_ci_low_us(lo);
  t.mutable_result()->mutable_stats()->set_ci_high_us(hi);
  return t;
}

TEST(SelectBestIncumbentTest, IncumbentKeptUnlessBeatenBeyondTheInterval) {
  const std::vector<v1::Trial> incumbent = {WithCi(100, 7, 10.0, 9.5, 10.5)};
  // Challenger's median is lower, but its CI reaches the incumbent's.
  const v1::GetBestResponse kept = SelectBest(
      {WithCi(1, 1, 9.6, 9.0, 9.6), WithCi(2, 2, 20.0, 19.0, 21.0)}, incumbent);
  ASSERT_EQ(kept.workloads_size(), 1);
  const v1::BestForWorkload& k = kept.workloads(0);
  EXPECT_EQ(k.best().trial_id(), 100);
  EXPECT_EQ(k.runner_up().trial_id(), 1);
  EXPECT_NEAR(k.margin_us(), -0.4, 1e-12);
  EXPECT_TRUE(k.tie());
  EXPECT_THAT(Tied(k), ElementsAre(100, 1));
  EXPECT_EQ(DecidedBy(k), kRuleIncumbentKept);
  // Challenger's CI high below the incumbent's CI low: the challenger wins.
  const v1::GetBestResponse won = SelectBest(
      {WithCi(1, 1, 9.0, 8.5, 9.4), WithCi(2, 2, 20.0, 19.0, 21.0)}, incumbent);
  const v1::BestForWorkload& w = won.workloads(0);
  EXPECT_EQ(w.best().trial_id(), 1);
  EXPECT_EQ(w.runner_up().trial_id(), 2);
  EXPECT_FALSE(w.tie());
  EXPECT_EQ(DecidedBy(w), kRuleChallengerWon);
  // An incumbent of another fingerprint does not count.
  const v1::GetBestResponse other = SelectBest(
      {WithCi(1, 1, 9.6, 9.0, 9.6)}, {WithCi(100, 7, 1.0, 0.5, 1.5, "old")});
  EXPECT_EQ(other.workloads(0).best().trial_id(), 1);
  EXPECT_EQ(DecidedBy(other.workloads(0)), kRuleFastest);
}

// A nightly sweep that re-measures the incumbent's config 35% slower:
// `best` shows the new figure, never the previous night's.
TEST(SelectBestIncumbentTest, ARemeasuredIncumbentShowsTheNewFigure) {
  const std::vector<v1::Trial> incumbent = {WithCi(100, 7, 10.0, 9.5, 10.5)};
  const v1::GetBestResponse slower = SelectBest(
      {WithCi(5, 7, 13.5, 13.0, 14.0), WithCi(6, 2, 20.0, 19.0, 21.0)},
      incumbent);
  ASSERT_EQ(slower.workloads_size(), 1);
  const v1::BestForWorkload& s = slower.workloads(0);
  EXPECT_EQ(s.best().trial_id(), 5);
  EXPECT_DOUBLE_EQ(s.best().result().stats().median_us(), 13.5);
  EXPECT_EQ(s.runner_up().trial_id(), 6);
  EXPECT_EQ(DecidedBy(s), kRuleIncumbentKept);
  EXPECT_THAT(s.best().reason(),
              ::testing::HasSubstr("incumbent trial 100 re-measured as "
                                   "trial 5"));
  // A challenger beyond the new figure's interval wins.
  const v1::GetBestResponse beaten = SelectBest(
      {WithCi(5, 7, 13.5, 13.0, 14.0), WithCi(6, 2, 9.0, 8.5, 9.4)}, incumbent);
  EXPECT_EQ(beaten.workloads(0).best().trial_id(), 6);
  EXPECT_EQ(DecidedBy(beaten.workloads(0)), kRuleChallengerWon);
  // Alone, the re-measured incumbent is kept with its new figure.
  const v1::GetBestResponse alone =
      SelectBest({WithCi(5, 7, 13.5, 13.0, 14.0)}, incumbent);
  EXPECT_EQ(alone.workloads(0).best().trial_id(), 5);
  EXPECT_FALSE(alone.workloads(0).has_runner_up());
  EXPECT_EQ(DecidedBy(alone.workloads(0)), kRuleIncumbentKept);
}

}  // namespace
}  // namespace moetune::tuner
