// The scheduler driving strategies beyond the grid: proposals as results
// arrive, resume after a restart without rerunning finished work, and
// incumbents accepted when a sweep finishes.
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "coordinator/queries.h"
#include "coordinator/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_helpers.h"

namespace moetune::coordinator {
namespace {

v1::SweepSpec HalvingSpec() {
  v1::SweepSpec spec;
  spec.set_name("halving");
  spec.mutable_workload()->set_model_preset("tiny");
  spec.mutable_workload()->add_batch_sizes(4);
  spec.mutable_workload()->add_context_lengths(16);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_space()->add_moe_backends("cpu_blocked");
  for (auto [n, k] : {std::pair{4, 64}, {8, 128}}) {
    v1::TileShape* tile = spec.mutable_space()->add_tiles();
    tile->set_block_n(n);
    tile->set_block_k(k);
  }
  for (int ep : {1, 2, 4}) spec.mutable_space()->add_ep(ep);
  spec.mutable_measurement()->set_iterations(27);
  spec.mutable_strategy()->set_kind(v1::Strategy::SUCCESSIVE_HALVING);
  return spec;
}

// A made-up but deterministic speed per config: what a worker would measure.
double MedianFor(const v1::TrialConfig& c) {
  double us = c.moe_backend() == "cpu_reference" ? 500 : 100;
  us += 10.0 * c.tile().block_n() + 20.0 * c.ep();
  return us;
}

v1::ReportResultRequest Measure(const v1::Trial& trial,
                                const std::string& token, double scale = 1.0) {
  const double m = MedianFor(trial.config()) * scale;
  std::vector<double> samples;
  for (int i = 0; i < trial.measurement().iterations(); ++i)
    samples.push_back(m * (1.0 + 0.002 * ((i % 5) - 2)));
  v1::ReportResultRequest request = DoneReport(trial, token, samples, m, "fp");
  request.mutable_result()->mutable_stats()->set_ci_low_us(m * 0.998);
  request.mutable_result()->mutable_stats()->set_ci_high_us(m * 1.002);
  return request;
}

class StrategySchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "moetune_strategy_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
            ".db";
    std::filesystem::remove(path_);
    Restart();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // A fresh coordinator over the same database file.
  void Restart() {
    scheduler_.reset();
    registry_.reset();
    store_.reset();
    store_ = *db::Store::Open(path_);
    registry_ = std::make_unique<WorkerRegistry>(&clock_, 100000);
    scheduler_ = std::make_unique<Scheduler>(
        store_.get(), registry_.get(), &clock_, SchedulerOptions{100000, 100});
    ASSERT_TRUE(scheduler_->RestoreWorkers().ok());
    ASSERT_TRUE(scheduler_->ResumeSweeps().ok());
    v1::RegisterWorkerRequest request;
    request.set_name("host:cpu");
    *request.mutable_probe() = CpuWorkerProbe();
    const auto registered = scheduler_->RegisterWorker(request);
    worker_ = registered->worker_id();
    token_ = registered->token();
  }
  // Runs up to `limit` trials; returns how many ran.
  int RunTrials(int limit, double scale = 1.0) {
    int ran = 0;
    while (ran < limit) {
      const auto acquired = scheduler_->Acquire(worker_, token_);
      if (!acquired.ok() || !acquired->granted()) break;
      EXPECT_TRUE(scheduler_->Report(Measure(acquired->trial(), token_, scale))
                      ->accepted());
      ++ran;
    }
    return ran;
  }
  std::vector<v1::Trial> Trials(int64_t sweep_id) {
    v1::TrialFilter filter;
    filter.set_sweep_id(sweep_id);
    return *store_->QueryTrials(filter);
  }

  std::string path_;
  FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
  std::string worker_;
  std::string token_;
};

TEST_F(StrategySchedulingTest, SuccessiveHalvingAddsRungsUntilDone) {
  const auto submitted = scheduler_->Submit(HalvingSpec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int first_batch = submitted->trial_count();
  const int ran = RunTrials(1000);
  EXPECT_GT(ran, first_batch);  // later rungs were proposed as results came
  EXPECT_EQ(store_->GetSweep(submitted->sweep_id())->state(), v1::FINISHED);
  std::set<int> rungs;
  for (const v1::Trial& t : Trials(submitted->sweep_id())) {
    EXPECT_EQ(t.state(), v1::DONE);
    rungs.insert(t.rung());
  }
  EXPECT_TRUE(rungs.count(0)) << "full-fidelity trials at the end";
  EXPECT_GT(rungs.size(), 1u);
  v1::GetBestRequest request;
  request.set_sweep_id(submitted->sweep_id());
  const auto best = AnswerGetBest(*store_, request);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(best->workloads_size(), 1);
  // The fastest point: cpu_blocked 4x64 at ep 1.
  EXPECT_EQ(best->workloads(0).best().config().tile().block_n(), 4);
  EXPECT_EQ(best->workloads(0).best().config().ep(), 1);
}

TEST_F(StrategySchedulingTest, ResumeAfterARestartNeverRerunsFinishedWork) {
  const auto submitted = scheduler_->Submit(HalvingSpec());
  ASSERT_TRUE(submitted.ok());
  RunTrials(5);
  // One trial is running when the coordinator dies; its worker reports it to
  // the restarted coordinator, which accepts it (same trial, same attempt).
  const auto running = scheduler_->Acquire(worker_, token_);
  ASSERT_TRUE(running->granted());
  const std::string running_token = token_;
  Restart();
  EXPECT_TRUE(
      scheduler_->Report(Measure(running->trial(), running_token))->accepted());
  RunTrials(1000);
  const std::vector<v1::Trial> trials = Trials(submitted->sweep_id());
  std::map<std::string, int> keys;
  for (const v1::Trial& t : trials) ++keys[t.proposal_key()];
  for (const auto& [key, count] : keys) EXPECT_EQ(count, 1) << key;
  EXPECT_EQ(store_->GetSweep(submitted->sweep_id())->state(), v1::FINISHED);
  // The same sweep run without a restart proposes the same keys.
  const auto again = scheduler_->Submit(HalvingSpec());
  RunTrials(1000);
  std::set<std::string> first, second;
  for (const v1::Trial& t : trials) first.insert(t.proposal_key());
  for (const v1::Trial& t : Trials(again->sweep_id()))
    second.insert(t.proposal_key());
  EXPECT_EQ(first, second);
}

TEST_F(StrategySchedulingTest, IncumbentIsKeptUnlessBeatenBeyondTheNoise) {
  v1::SweepSpec spec = HalvingSpec();
  spec.mutable_strategy()->set_kind(v1::Strategy::GRID);
  const auto first = scheduler_->Submit(spec);
  RunTrials(1000);
  // A second sweep measures everything 0.1 % faster: inside the noise.
  const auto second = scheduler_->Submit(spec);
  RunTrials(1000, 0.999);
  v1::GetBestRequest request;
  request.set_sweep_id(second->sweep_id());
  auto best = AnswerGetBest(*store_, request);
  ASSERT_TRUE(best.ok()) << best.status();
  // The incumbent's config was measured again: it is kept, and shown with
  // the second sweep's figure (trials 10-18), not the first's.
  const v1::Trial kept = best->workloads(0).best();
  EXPECT_EQ(best->workloads(0).decided_by(), "incumbent-kept");
  EXPECT_GT(kept.trial_id(), 9);
  EXPECT_LE(kept.trial_id(), 18);
  // A third, 20 % faster throughout: the same config, again with the new
  // figure (a different config has to beat it beyond the interval to win:
  // tests/tuner/winner_test.cc).
  const auto third = scheduler_->Submit(spec);
  RunTrials(1000, 0.8);
  request.set_sweep_id(third->sweep_id());
  best = AnswerGetBest(*store_, request);
  EXPECT_EQ(best->workloads(0).decided_by(), "incumbent-kept");
  EXPECT_GT(best->workloads(0).best().trial_id(), 18);
  EXPECT_EQ(best->workloads(0).best().config().SerializeAsString(),
            kept.config().SerializeAsString());
  EXPECT_LT(best->workloads(0).best().result().stats().median_us(),
            kept.result().stats().median_us());
}

}  // namespace
}  // namespace moetune::coordinator
