#include "coordinator/scheduler.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_helpers.h"

namespace moetune::coordinator {
namespace {

using ::testing::HasSubstr;

v1::SweepSpec Spec(std::vector<std::string> backends) {
  v1::SweepSpec spec;
  spec.set_name("test");
  spec.mutable_workload()->set_model_preset("tiny");
  spec.mutable_workload()->add_batch_sizes(1);
  spec.mutable_workload()->add_context_lengths(16);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  for (const std::string& b : backends)
    spec.mutable_space()->add_moe_backends(b);
  spec.mutable_measurement()->set_max_attempts(2);
  return spec;
}

v1::ReportResultRequest Done(const v1::Trial& trial, double median_us) {
  return DoneReport(trial, {median_us}, median_us, "fp-cpu");
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *db::Store::Open(":memory:");
    registry_ = std::make_unique<WorkerRegistry>(&clock_, 1000);
    scheduler_ = std::make_unique<Scheduler>(
        store_.get(), registry_.get(), &clock_,
        SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/0});
  }
  // On `scheduler`, or the fixture's when null.
  std::string RegisterCpuWorker(const std::string& name,
                                Scheduler* scheduler = nullptr) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    *request.mutable_probe() = CpuWorkerProbe();
    Scheduler* on = scheduler != nullptr ? scheduler : scheduler_.get();
    return on->RegisterWorker(request)->worker_id();
  }
  v1::Sweep Sweep(int64_t id) { return *store_->GetSweep(id); }

  FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BadSpecIsRejectedAndRecordsNothing) {
  v1::SweepSpec spec = Spec({"cpu_reference"});
  spec.mutable_space()->add_tp(3);
  const auto response = scheduler_->Submit(spec);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("space.tp[0]"));
  EXPECT_TRUE(store_->ListSweeps(0)->empty());
}

TEST_F(SchedulerTest, RunsASweepToTheEnd) {
  const std::string worker = RegisterCpuWorker("host:cpu");
  const auto submitted =
      scheduler_->Submit(Spec({"cpu_reference", "cpu_blocked"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->trial_count(), 2);
  for (int i = 0; i < 2; ++i) {
    const auto acquired = scheduler_->Acquire(worker);
    ASSERT_TRUE(acquired.ok() && acquired->granted());
    EXPECT_EQ(acquired->trial().state(), v1::LEASED);
    EXPECT_EQ(acquired->trial().attempt(), 1);
    ASSERT_TRUE(
        scheduler_->Report(Done(acquired->trial(), 10 + i))->accepted());
  }
  EXPECT_FALSE(scheduler_->Acquire(worker)->granted());
  EXPECT_EQ(Sweep(submitted->sweep_id()).state(), v1::FINISHED);
}

TEST_F(SchedulerTest, BackendNoLiveWorkerHasIsUnavailableWithTheReason) {
  const std::string worker = RegisterCpuWorker("host:cpu");
  const auto submitted = scheduler_->Submit(Spec({"fused_gemv"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_FALSE(scheduler_->Acquire(worker)->granted());
  ASSERT_TRUE(scheduler_->MarkUnavailableTrials().ok());  // the tick's work
  const v1::Trial trial = store_->QueryTrials(v1::TrialFilter())->front();
  EXPECT_EQ(trial.state(), v1::UNAVAILABLE);
  EXPECT_THAT(trial.reason(), HasSubstr("host:cpu: built without CUDA"));
  EXPECT_EQ(Sweep(submitted->sweep_id()).state(), v1::FINISHED);
}

TEST_F(SchedulerTest, AGraceLetsALateWorkerClaimItsBackend) {
  Scheduler patient(store_.get(), registry_.get(), &clock_,
                    SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/500});
  const std::string cpu = RegisterCpuWorker("host:cpu", &patient);
  ASSERT_TRUE(patient.Submit(Spec({"fused_gemv"})).ok());
  EXPECT_FALSE(patient.Acquire(cpu)->granted());
  const v1::Trial waiting = store_->QueryTrials(v1::TrialFilter())->front();
  EXPECT_EQ(waiting.state(), v1::QUEUED);  // inside the grace: not judged
  clock_.AdvanceMs(300);
  v1::RegisterWorkerRequest gpu_request;
  gpu_request.set_name("host:0");
  v1::BackendProbe* fused = gpu_request.mutable_probe()->add_backends();
  fused->set_name("fused_gemv");
  fused->set_available(true);
  const std::string gpu = patient.RegisterWorker(gpu_request)->worker_id();
  EXPECT_TRUE(patient.Acquire(gpu)->granted());
}

TEST_F(SchedulerTest, AfterTheGraceNoLiveWorkerMeansUnavailable) {
  Scheduler patient(store_.get(), registry_.get(), &clock_,
                    SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/500});
  const std::string cpu = RegisterCpuWorker("host:cpu", &patient);
  ASSERT_TRUE(patient.Submit(Spec({"fused_gemv"})).ok());
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(store_->QueryTrials(v1::TrialFilter())->front().state(),
            v1::QUEUED);
  clock_.AdvanceMs(600);
  v1::HeartbeatRequest beat;
  beat.set_worker_id(cpu);
  ASSERT_TRUE(patient.Heartbeat(beat).known());
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(store_->QueryTrials(v1::TrialFilter())->front().state(),
            v1::UNAVAILABLE);
}

TEST_F(SchedulerTest, ATrialWaitsForTheWorkerThatCanRunIt) {
  const std::string cpu = RegisterCpuWorker("host:cpu");
  v1::RegisterWorkerRequest gpu_request;
  gpu_request.set_name("host:0");
  v1::BackendProbe* fused = gpu_request.mutable_probe()->add_backends();
  fused->set_name("fused_gemv");
  fused->set_available(true);
  const std::string gpu = scheduler_->RegisterWorker(gpu_request)->worker_id();
  ASSERT_TRUE(scheduler_->Submit(Spec({"fused_gemv"})).ok());
  EXPECT_FALSE(scheduler_->Acquire(cpu)->granted());  // not marked unavailable
  const auto acquired = scheduler_->Acquire(gpu);
  ASSERT_TRUE(acquired->granted());
  EXPECT_EQ(acquired->trial().config().moe_backend(), "fused_gemv");
}

TEST_F(SchedulerTest, ReportsAreIdempotent) {
  const std::string worker = RegisterCpuWorker("host:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const v1::Trial trial = scheduler_->Acquire(worker)->trial();
  EXPECT_TRUE(scheduler_->Report(Done(trial, 5))->accepted());
  const auto again = scheduler_->Report(Done(trial, 5));
  EXPECT_FALSE(again->accepted());
  EXPECT_TRUE(again->duplicate());
}

TEST_F(SchedulerTest, LostWorkerRequeuesThenFailsPastMaxAttempts) {
  const std::string a = RegisterCpuWorker("host-a:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  ASSERT_TRUE(scheduler_->Acquire(a)->granted());
  clock_.AdvanceMs(1500);  // a's lease lapses
  const std::string b = RegisterCpuWorker("host-b:cpu");
  const auto second = scheduler_->Acquire(b);
  ASSERT_TRUE(second->granted());
  EXPECT_EQ(second->trial().attempt(), 2);
  clock_.AdvanceMs(1500);  // b goes silent too; max_attempts is 2
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial trial = store_->QueryTrials(v1::TrialFilter())->front();
  EXPECT_EQ(trial.state(), v1::FAILED);
  EXPECT_THAT(trial.reason(), HasSubstr("went silent"));
}

TEST_F(SchedulerTest, HeartbeatsKeepALeaseAndCarryCancellation) {
  const std::string worker = RegisterCpuWorker("host:cpu");
  const auto submitted =
      scheduler_->Submit(Spec({"cpu_reference", "cpu_blocked"}));
  const v1::Trial trial = scheduler_->Acquire(worker)->trial();
  v1::HeartbeatRequest beat;
  beat.set_worker_id(worker);
  beat.set_current_trial_id(trial.trial_id());
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(600);
    EXPECT_TRUE(scheduler_->Heartbeat(beat).known());
  }
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(store_->GetTrial(trial.trial_id())->state(), v1::LEASED);
  EXPECT_FALSE(scheduler_->Heartbeat(beat).cancel_trial());
  const auto cancelled = scheduler_->Cancel(submitted->sweep_id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::ABORTED);
  EXPECT_TRUE(scheduler_->Heartbeat(beat).cancel_trial());
  beat.set_worker_id("w:stranger");
  EXPECT_FALSE(scheduler_->Heartbeat(beat).known());
}

TEST_F(SchedulerTest, UnknownWorkerMustRegisterAndBadOutcomesAreRefused) {
  v1::RegisterWorkerRequest nameless;
  const auto registered = scheduler_->RegisterWorker(nameless);
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(registered.status().message()), HasSubstr("name:"));
  EXPECT_EQ(scheduler_->Acquire("w:nobody").status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::ReportResultRequest request;
  request.mutable_result()->set_outcome(v1::QUEUED);
  const auto response = scheduler_->Report(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("result.outcome: QUEUED is not allowed"));
}

TEST(WorkerRegistryTest, LivenessFollowsTheLease) {
  FakeClock clock;
  WorkerRegistry registry(&clock, 1000);
  const std::string id = registry.Register("h:0", v1::Probe());
  EXPECT_EQ(id, "w:h:0");
  EXPECT_TRUE(registry.IsAlive(id));
  clock.AdvanceMs(1001);
  EXPECT_FALSE(registry.IsAlive(id));
  EXPECT_TRUE(registry.Heartbeat(id, 7));
  EXPECT_TRUE(registry.IsAlive(id));
  EXPECT_EQ(registry.Get(id)->current_trial_id, 7);
  EXPECT_EQ(registry.AliveWorkers().size(), 1u);
  // Unknown ids are given one lease of grace after a (re)start only.
  EXPECT_FALSE(registry.IsAlive("w:other"));
  EXPECT_FALSE(registry.Heartbeat("w:other", 0));
}

}  // namespace
}  // namespace moetune::coordinator
