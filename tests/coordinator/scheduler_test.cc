#include "coordinator/scheduler.h"

#include <memory>

#include "coordinator/identity.h"
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

// A registration as the worker keeps it.
struct Registered {
  std::string id;
  std::string token;
};

v1::ReportResultRequest Done(const v1::Trial& trial, const Registered& by,
                             double median_us) {
  return DoneReport(trial, by.token, {median_us}, median_us, "fp-cpu");
}

v1::HeartbeatRequest Beat(const Registered& worker, int64_t trial_id) {
  v1::HeartbeatRequest beat;
  beat.set_worker_id(worker.id);
  beat.set_token(worker.token);
  beat.set_current_trial_id(trial_id);
  return beat;
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
  Registered RegisterCpuWorker(const std::string& name,
                               Scheduler* scheduler = nullptr) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    *request.mutable_probe() = CpuWorkerProbe();
    return Register(request, scheduler);
  }
  Registered Register(const v1::RegisterWorkerRequest& request,
                      Scheduler* scheduler = nullptr) {
    Scheduler* on = scheduler != nullptr ? scheduler : scheduler_.get();
    const auto response = on->RegisterWorker(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return {response->worker_id(), response->token()};
  }
  absl::StatusOr<v1::AcquireTrialResponse> Acquire(
      const Registered& worker, Scheduler* scheduler = nullptr) {
    Scheduler* on = scheduler != nullptr ? scheduler : scheduler_.get();
    return on->Acquire(worker.id, worker.token);
  }
  v1::Trial OnlyTrial() {
    return store_->QueryTrials(v1::TrialFilter())->front();
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
  const Registered worker = RegisterCpuWorker("host:cpu");
  const auto submitted =
      scheduler_->Submit(Spec({"cpu_reference", "cpu_blocked"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->trial_count(), 2);
  for (int i = 0; i < 2; ++i) {
    const auto acquired = Acquire(worker);
    ASSERT_TRUE(acquired.ok() && acquired->granted());
    EXPECT_EQ(acquired->trial().state(), v1::LEASED);
    EXPECT_EQ(acquired->trial().attempt(), 1);
    ASSERT_TRUE(scheduler_->Report(Done(acquired->trial(), worker, 10 + i))
                    ->accepted());
  }
  EXPECT_FALSE(Acquire(worker)->granted());
  EXPECT_EQ(Sweep(submitted->sweep_id()).state(), v1::FINISHED);
}

// A worker that started beside a busy job measured 5 GB/s where its kind
// of device reads 10: its floors are recorded at 10, not flattered.
TEST_F(SchedulerTest, FloorsAreRecordedAtTheBestBandwidthOfTheDevice) {
  RegisterCpuWorker("idle:cpu");  // measured 10 GB/s
  v1::RegisterWorkerRequest loaded;
  loaded.set_name("loaded:cpu");
  *loaded.mutable_probe() = CpuWorkerProbe();
  loaded.mutable_probe()->mutable_device()->set_measured_read_gbps(5);
  const Registered worker = Register(loaded);
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const auto acquired = Acquire(worker);
  ASSERT_TRUE(acquired.ok() && acquired->granted());
  v1::ReportResultRequest report = Done(acquired->trial(), worker, 40);
  *report.mutable_result()->mutable_fingerprint() =
      CpuWorkerProbe().fingerprint();
  v1::Roofline& r = *report.mutable_result()->mutable_roofline();
  r.set_bytes(100'000);  // 20 us at 5 GB/s, 10 us at 10 GB/s
  r.set_floor_us(20);
  r.set_efficiency(0.5);
  ASSERT_TRUE(scheduler_->Report(report)->accepted());
  const v1::Roofline& stored = OnlyTrial().result().roofline();
  EXPECT_DOUBLE_EQ(stored.floor_us(), 10);
  EXPECT_DOUBLE_EQ(stored.efficiency(), 0.25);
  EXPECT_DOUBLE_EQ(stored.read_gbps(), 10);
}

TEST_F(SchedulerTest, BackendNoLiveWorkerHasIsUnavailableWithTheReason) {
  const Registered worker = RegisterCpuWorker("host:cpu");
  const auto submitted = scheduler_->Submit(Spec({"fused_gemv"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_FALSE(Acquire(worker)->granted());
  ASSERT_TRUE(scheduler_->MarkUnavailableTrials().ok());  // the tick's work
  const v1::Trial trial = OnlyTrial();
  EXPECT_EQ(trial.state(), v1::UNAVAILABLE);
  EXPECT_THAT(trial.reason(), HasSubstr("host:cpu: built without CUDA"));
  EXPECT_EQ(Sweep(submitted->sweep_id()).state(), v1::FINISHED);
}

v1::RegisterWorkerRequest GpuRequest() {
  v1::RegisterWorkerRequest request;
  request.set_name("host:0");
  v1::BackendProbe* fused = request.mutable_probe()->add_backends();
  fused->set_name("fused_gemv");
  fused->set_available(true);
  return request;
}

TEST_F(SchedulerTest, AGraceLetsALateWorkerClaimItsBackend) {
  Scheduler patient(store_.get(), registry_.get(), &clock_,
                    SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/500});
  const Registered cpu = RegisterCpuWorker("host:cpu", &patient);
  ASSERT_TRUE(patient.Submit(Spec({"fused_gemv"})).ok());
  EXPECT_FALSE(Acquire(cpu, &patient)->granted());
  EXPECT_EQ(OnlyTrial().state(), v1::QUEUED);  // inside the grace: not judged
  clock_.AdvanceMs(300);
  const Registered gpu = Register(GpuRequest(), &patient);
  EXPECT_TRUE(Acquire(gpu, &patient)->granted());
}

TEST_F(SchedulerTest, AfterTheGraceNoLiveWorkerMeansUnavailable) {
  Scheduler patient(store_.get(), registry_.get(), &clock_,
                    SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/500});
  const Registered cpu = RegisterCpuWorker("host:cpu", &patient);
  ASSERT_TRUE(patient.Submit(Spec({"fused_gemv"})).ok());
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::QUEUED);
  clock_.AdvanceMs(600);
  ASSERT_TRUE(patient.Heartbeat(Beat(cpu, 0))->known());
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::UNAVAILABLE);
}

// An embedded cluster whose workers are all up expects no other: trials
// none of them can run end UNAVAILABLE without waiting the grace.
TEST_F(SchedulerTest, WithNoMoreWorkersExpectedTheGraceIsNotWaited) {
  Scheduler patient(store_.get(), registry_.get(), &clock_,
                    SchedulerOptions{1000, 100, /*unavailable_grace_ms=*/500});
  const Registered cpu = RegisterCpuWorker("host:cpu", &patient);
  EXPECT_TRUE(patient.HasLiveWorker("host:cpu"));
  EXPECT_FALSE(patient.HasLiveWorker("host:0"));
  ASSERT_TRUE(patient.Submit(Spec({"fused_gemv"})).ok());
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::QUEUED);  // inside the grace
  patient.NoMoreWorkersExpected();
  ASSERT_TRUE(patient.MarkUnavailableTrials().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::UNAVAILABLE);
}

TEST_F(SchedulerTest, ATrialWaitsForTheWorkerThatCanRunIt) {
  const Registered cpu = RegisterCpuWorker("host:cpu");
  const Registered gpu = Register(GpuRequest());
  ASSERT_TRUE(scheduler_->Submit(Spec({"fused_gemv"})).ok());
  EXPECT_FALSE(Acquire(cpu)->granted());  // not marked unavailable
  const auto acquired = Acquire(gpu);
  ASSERT_TRUE(acquired->granted());
  EXPECT_EQ(acquired->trial().config().moe_backend(), "fused_gemv");
}

TEST_F(SchedulerTest, ReportsAreIdempotent) {
  const Registered worker = RegisterCpuWorker("host:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const v1::Trial trial = Acquire(worker)->trial();
  EXPECT_TRUE(scheduler_->Report(Done(trial, worker, 5))->accepted());
  const auto again = scheduler_->Report(Done(trial, worker, 5));
  EXPECT_FALSE(again->accepted());
  EXPECT_TRUE(again->duplicate());
}

TEST_F(SchedulerTest, LostWorkerRequeuesThenFailsPastMaxAttempts) {
  const Registered a = RegisterCpuWorker("host-a:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  ASSERT_TRUE(Acquire(a)->granted());
  clock_.AdvanceMs(1500);  // a's lease lapses
  const Registered b = RegisterCpuWorker("host-b:cpu");
  const auto second = Acquire(b);
  ASSERT_TRUE(second->granted());
  EXPECT_EQ(second->trial().attempt(), 2);
  clock_.AdvanceMs(1500);  // b goes silent too; max_attempts is 2
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial trial = OnlyTrial();
  EXPECT_EQ(trial.state(), v1::FAILED);
  EXPECT_THAT(trial.reason(), HasSubstr("went silent"));
}

TEST_F(SchedulerTest, HeartbeatsKeepALeaseAndCarryCancellation) {
  const Registered worker = RegisterCpuWorker("host:cpu");
  const auto submitted =
      scheduler_->Submit(Spec({"cpu_reference", "cpu_blocked"}));
  const v1::Trial trial = Acquire(worker)->trial();
  const v1::HeartbeatRequest beat = Beat(worker, trial.trial_id());
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(600);
    EXPECT_TRUE(scheduler_->Heartbeat(beat)->known());
  }
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(store_->GetTrial(trial.trial_id())->state(), v1::LEASED);
  EXPECT_FALSE(scheduler_->Heartbeat(beat)->cancel_trial());
  const auto cancelled = scheduler_->Cancel(submitted->sweep_id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::ABORTED);
  EXPECT_TRUE(scheduler_->Heartbeat(beat)->cancel_trial());
  EXPECT_FALSE(scheduler_->Heartbeat(Beat({"w:stranger", "x"}, 0))->known());
}

// A cancelled sweep runs nothing more: a lease it still had, lost, ends the
// trial CANCELLED as its worker's report would have, rather than queued
// again for another worker to run.
TEST_F(SchedulerTest, ALeaseLostAfterCancelEndsCancelledNotQueued) {
  const Registered a = RegisterCpuWorker("host-a:cpu");
  const auto submitted = scheduler_->Submit(Spec({"cpu_reference"}));
  ASSERT_TRUE(Acquire(a)->granted());
  ASSERT_TRUE(scheduler_->Cancel(submitted->sweep_id()).ok());
  EXPECT_EQ(OnlyTrial().state(), v1::LEASED);  // its worker may still report
  clock_.AdvanceMs(1500);                      // a dies: its lease lapses
  const Registered b = RegisterCpuWorker("host-b:cpu");
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial trial = OnlyTrial();
  EXPECT_EQ(trial.state(), v1::CANCELLED);
  EXPECT_EQ(trial.reason(),
            absl::StrCat("sweep cancelled; worker ", a.id, " went silent"));
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_FALSE(Acquire(b)->granted());
}

// A database holding such a trial re-queued (a lease lost after the cancel):
// a restart closes it instead of handing it to the next worker.
TEST_F(SchedulerTest, ARestartClosesATrialLeftQueuedInACancelledSweep) {
  const Registered a = RegisterCpuWorker("host-a:cpu");
  const auto submitted = scheduler_->Submit(Spec({"cpu_reference"}));
  const v1::Trial leased = Acquire(a)->trial();
  ASSERT_TRUE(scheduler_->Cancel(submitted->sweep_id()).ok());
  ASSERT_TRUE(
      store_->RequeueTrial(leased.trial_id(), "lease lost", clock_.NowUnixMs())
          .ok());
  ASSERT_EQ(OnlyTrial().state(), v1::QUEUED);

  Scheduler restarted(store_.get(), registry_.get(), &clock_,
                      SchedulerOptions{1000, 100, 0});
  ASSERT_TRUE(restarted.ResumeSweeps().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::CANCELLED);
  EXPECT_EQ(OnlyTrial().reason(), "sweep cancelled");
  EXPECT_EQ(Sweep(submitted->sweep_id()).state(), v1::ABORTED);
  const Registered b = RegisterCpuWorker("host-b:cpu", &restarted);
  EXPECT_FALSE(Acquire(b, &restarted)->granted());
}

// The CLI's embedded workers have all stopped and their coordinator stops
// next: no lease they held would ever lapse. Each is lost at once, as a
// lapse would lose it; other workers' leases and recorded outcomes stay.
TEST_F(SchedulerTest, AStoppedWorkerLosesItsLeasesAtOnce) {
  const Registered gone = RegisterCpuWorker("local:0");
  const Registered earlier_1 = RegisterCpuWorker("local:1");
  const Registered local_1 = RegisterCpuWorker("local:1");  // a second time
  const Registered other = RegisterCpuWorker("host:cpu");
  const auto cancelled = scheduler_->Submit(Spec({"cpu_reference"}));
  const auto running =
      scheduler_->Submit(Spec({"cpu_reference", "cpu_blocked"}));
  const v1::Trial of_cancelled = Acquire(gone)->trial();
  const v1::Trial done = Acquire(earlier_1)->trial();
  ASSERT_TRUE(scheduler_->Report(Done(done, earlier_1, 4))->accepted());
  const v1::Trial of_running = Acquire(local_1)->trial();
  ASSERT_FALSE(Acquire(other)->granted());  // nothing left
  ASSERT_TRUE(scheduler_->Cancel(cancelled->sweep_id()).ok());
  ASSERT_TRUE(
      scheduler_->ReleaseStoppedWorker("local:0", "local:0 exited").ok());
  ASSERT_TRUE(
      scheduler_->ReleaseStoppedWorker("local:1", "local:1 exited").ok());
  const v1::Trial ended = *store_->GetTrial(of_cancelled.trial_id());
  EXPECT_EQ(ended.state(), v1::CANCELLED);
  EXPECT_EQ(ended.reason(), "sweep cancelled; local:0 exited");
  EXPECT_EQ(store_->GetTrial(done.trial_id())->state(), v1::DONE);
  const v1::Trial requeued = *store_->GetTrial(of_running.trial_id());
  EXPECT_EQ(requeued.state(), v1::QUEUED);
  EXPECT_EQ(requeued.reason(), "local:1 exited");
  EXPECT_EQ(Sweep(running->sweep_id()).state(), v1::RUNNING);
  // Another worker's lease is its own.
  const v1::Trial of_other = Acquire(other)->trial();
  ASSERT_TRUE(scheduler_->ReleaseStoppedWorker("local:0", "again").ok());
  EXPECT_EQ(store_->GetTrial(of_other.trial_id())->state(), v1::LEASED);
}

TEST_F(SchedulerTest, UnknownWorkerMustRegisterAndBadOutcomesAreRefused) {
  v1::RegisterWorkerRequest nameless;
  const auto registered = scheduler_->RegisterWorker(nameless);
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(registered.status().message()), HasSubstr("name:"));
  EXPECT_EQ(scheduler_->Acquire("w:nobody", "").status().code(),
            absl::StatusCode::kUnauthenticated);
  v1::ReportResultRequest request;
  request.mutable_result()->set_outcome(v1::QUEUED);
  const auto response = scheduler_->Report(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("result.outcome: QUEUED is not allowed"));
}

// Results count only from the lease holder, with its token.
TEST_F(SchedulerTest, OnlyTheLeaseHolderWithItsTokenIsHeard) {
  const Registered holder = RegisterCpuWorker("host-a:cpu");
  const Registered other = RegisterCpuWorker("host-b:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const v1::Trial trial = Acquire(holder)->trial();
  // Another registered worker, with its own valid token, is refused.
  v1::ReportResultRequest forged = Done(trial, other, 1);
  forged.set_worker_id(other.id);
  const auto refused = scheduler_->Report(forged);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_FALSE(refused->accepted());
  EXPECT_THAT(refused->reason(), HasSubstr("is leased to"));
  // The holder's id with a wrong token is not a registration at all.
  v1::ReportResultRequest guessed = Done(trial, holder, 1);
  guessed.set_token(other.token);
  EXPECT_EQ(scheduler_->Report(guessed).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      scheduler_->Heartbeat(Beat({holder.id, other.token}, 0)).status().code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(scheduler_->Acquire(holder.id, "").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(OnlyTrial().state(), v1::LEASED);  // nothing was recorded
  EXPECT_TRUE(scheduler_->Report(Done(trial, holder, 7))->accepted());
}

TEST_F(SchedulerTest, WorkersOfOneNameAreDistinctRegistrations) {
  const Registered first = RegisterCpuWorker("host:cpu");
  const Registered second = RegisterCpuWorker("host:cpu");
  EXPECT_NE(first.id, second.id);
  EXPECT_NE(first.token, second.token);
  EXPECT_THAT(first.id, ::testing::StartsWith("w:host:cpu/"));
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  ASSERT_TRUE(Acquire(first)->granted());
  // The second keeps beating; the first dies. Its lease lapses all the same.
  for (int i = 0; i < 3; ++i) {
    clock_.AdvanceMs(600);
    ASSERT_TRUE(scheduler_->Heartbeat(Beat(second, 0))->known());
  }
  const auto retried = Acquire(second);
  ASSERT_TRUE(retried->granted());
  EXPECT_EQ(retried->trial().attempt(), 2);
}

TEST_F(SchedulerTest, RegisteringAgainReleasesTheOldLeases) {
  const Registered before = RegisterCpuWorker("host:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const v1::Trial trial = Acquire(before)->trial();
  v1::RegisterWorkerRequest again;
  again.set_name("host:cpu");
  *again.mutable_probe() = CpuWorkerProbe();
  again.set_previous_worker_id(before.id);
  again.set_previous_token(before.token);
  const Registered after = Register(again);
  EXPECT_NE(after.id, before.id);
  EXPECT_EQ(OnlyTrial().state(), v1::QUEUED);  // released at once
  EXPECT_THAT(OnlyTrial().reason(), HasSubstr("registered again"));
  EXPECT_FALSE(scheduler_->Heartbeat(Beat(before, 0))->known());
  EXPECT_EQ(scheduler_->Report(Done(trial, before, 1)).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Acquire(after)->granted());
}

TEST_F(SchedulerTest, NamingAnotherWorkersIdDoesNotReleaseItsLeases) {
  const Registered victim = RegisterCpuWorker("host-a:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  ASSERT_TRUE(Acquire(victim)->granted());
  v1::RegisterWorkerRequest hostile;
  hostile.set_name("host-b:cpu");
  hostile.set_previous_worker_id(victim.id);
  hostile.set_previous_token("guess");
  Register(hostile);
  EXPECT_EQ(OnlyTrial().state(), v1::LEASED);
  EXPECT_TRUE(scheduler_->Heartbeat(Beat(victim, 0))->known());
}

// A worker that gave up delivering a result keeps beating, but names no
// trial; the lease is released and the trial retried.
TEST_F(SchedulerTest, AResultTheWorkerGaveUpOnIsRetried) {
  const Registered worker = RegisterCpuWorker("host:cpu");
  ASSERT_TRUE(scheduler_->Submit(Spec({"cpu_reference"})).ok());
  const v1::Trial trial = Acquire(worker)->trial();
  clock_.AdvanceMs(100);
  ASSERT_TRUE(scheduler_->Heartbeat(Beat(worker, trial.trial_id()))->known());
  clock_.AdvanceMs(300);  // the report fails; heartbeats go on, idle
  ASSERT_TRUE(scheduler_->Heartbeat(Beat(worker, 0))->known());
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::LEASED);  // too soon: may be in flight
  clock_.AdvanceMs(500);
  ASSERT_TRUE(scheduler_->Heartbeat(Beat(worker, 0))->known());
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(OnlyTrial().state(), v1::QUEUED);
  EXPECT_THAT(OnlyTrial().reason(), HasSubstr("no longer runs it"));
  const auto retried = Acquire(worker);
  ASSERT_TRUE(retried->granted());
  EXPECT_EQ(retried->trial().attempt(), 2);
  // The late report of the first attempt is refused, not double-counted.
  const auto late = scheduler_->Report(Done(trial, worker, 3));
  EXPECT_FALSE(late->accepted());
  EXPECT_THAT(late->reason(), HasSubstr("attempt 1 no longer holds a lease"));
  EXPECT_TRUE(
      scheduler_->Report(Done(retried->trial(), worker, 3))->accepted());
}

// A retried submit (its first reply lost) makes no second sweep.
TEST_F(SchedulerTest, SubmitIsIdempotentOnItsRequestId) {
  const auto first = scheduler_->Submit(Spec({"cpu_reference"}), "req-1");
  ASSERT_TRUE(first.ok()) << first.status();
  const auto retry = scheduler_->Submit(Spec({"cpu_reference"}), "req-1");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->sweep_id(), first->sweep_id());
  EXPECT_EQ(store_->ListSweeps(0)->size(), 1u);
  const auto other = scheduler_->Submit(Spec({"cpu_reference"}), "req-2");
  EXPECT_NE(other->sweep_id(), first->sweep_id());
  const auto unnamed = scheduler_->Submit(Spec({"cpu_reference"}));
  EXPECT_EQ(store_->ListSweeps(0)->size(), 3u);
  const auto too_long =
      scheduler_->Submit(Spec({"cpu_reference"}), std::string(200, 'x'));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.status().message()),
              HasSubstr("request_id: 200 characters"));
}

// A space past the cap is refused with its count, before any expansion; no
// sweep is recorded.
TEST_F(SchedulerTest, AHugeSpaceIsRefusedWithItsSize) {
  v1::SweepSpec spec = Spec({"cpu_reference", "cpu_blocked"});
  for (int b = 2; b <= 1000; ++b) spec.mutable_workload()->add_batch_sizes(b);
  for (int c = 17; c <= 216; ++c)
    spec.mutable_workload()->add_context_lengths(c);
  const auto refused = scheduler_->Submit(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(refused.status().message()),
      HasSubstr("402000 points (1000 batch sizes x 201 context lengths"));
  EXPECT_TRUE(store_->ListSweeps(0)->empty());
}

// A budget smaller than the workload count names the budget, not the space.
TEST_F(SchedulerTest, ABudgetTooSmallForTheWorkloadsSaysSo) {
  v1::SweepSpec spec = Spec({"cpu_reference", "cpu_blocked"});
  for (int b = 2; b <= 5; ++b) spec.mutable_workload()->add_batch_sizes(b);
  spec.mutable_strategy()->set_kind(v1::Strategy::TPE);
  spec.mutable_strategy()->set_max_trials(3);
  const auto refused = scheduler_->Submit(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr("strategy:"));
  EXPECT_THAT(message, HasSubstr("over 5 workloads"));
  EXPECT_THAT(message, HasSubstr("max_trials 3"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("world_size")));
}

TEST(WorkerRegistryTest, LivenessFollowsTheLease) {
  FakeClock clock;
  WorkerRegistry registry(&clock, 1000);
  const Registration reg = registry.Register("h:0", v1::Probe());
  EXPECT_THAT(reg.worker_id, ::testing::MatchesRegex("w:h:0/[0-9a-f]{8}"));
  EXPECT_THAT(reg.token, ::testing::MatchesRegex("[0-9a-f]{64}"));
  EXPECT_TRUE(registry.IsAlive(reg.worker_id));
  clock.AdvanceMs(1001);
  EXPECT_FALSE(registry.IsAlive(reg.worker_id));
  EXPECT_TRUE(registry.Heartbeat(reg.worker_id, reg.token, 7));
  EXPECT_TRUE(registry.IsAlive(reg.worker_id));
  EXPECT_EQ(registry.Get(reg.worker_id)->current_trial_id, 7);
  EXPECT_EQ(registry.AliveWorkers().size(), 1u);
  EXPECT_FALSE(registry.Heartbeat(reg.worker_id, "wrong", 7));
  EXPECT_THAT(registry.IdsNamed("h:0"), ::testing::ElementsAre(reg.worker_id));
  EXPECT_TRUE(registry.IdsNamed("h:1").empty());
  // Unknown ids are given one lease of grace after a (re)start only.
  EXPECT_FALSE(registry.IsAlive("w:other"));
  EXPECT_FALSE(registry.Heartbeat("w:other", reg.token, 0));
}

TEST(WorkerRegistryTest, ARestartHonoursStoredRegistrations) {
  FakeClock clock;
  WorkerRegistry registry(&clock, 1000);
  const Registration reg = registry.Register("h:0", v1::Probe());
  WorkerRegistry restarted(&clock, 1000);
  db::WorkerIdentity identity;
  identity.worker_id = reg.worker_id;
  identity.name = "h:0";
  identity.token_sha256 = TokenDigest(reg.token);
  restarted.Restore({identity});
  EXPECT_TRUE(restarted.Authenticate(reg.worker_id, reg.token));
  EXPECT_FALSE(restarted.Authenticate(reg.worker_id, NewToken()));
  EXPECT_TRUE(restarted.IsAlive(reg.worker_id));
}

}  // namespace
}  // namespace moetune::coordinator
