// Gang scheduling against the Scheduler with fake workers and a fake clock:
// a MEASURED trial of world W is granted to W idle GPU workers of one host
// at once, never in part; a lost member tears the gang down and re-queues
// the trial whole; ranks' reports decide it together; a restart re-runs it
// whole; trials no host can serve are UNAVAILABLE with why.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_helpers.h"

namespace moetune::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kLeaseMs = 1000;

// A GPU worker on `host` with fused_gemv (and the CPU backends).
v1::Probe GpuProbe(const std::string& host) {
  v1::Probe probe = CpuWorkerProbe();
  probe.mutable_fingerprint()->set_hash("fp-gpu");
  probe.mutable_device()->set_is_gpu(true);
  probe.mutable_device()->set_ordinal(0);
  probe.mutable_device()->set_host_id(host);
  probe.mutable_device()->set_measured_read_gbps(4000);
  probe.mutable_backends(2)->set_available(true);  // fused_gemv
  probe.mutable_backends(2)->clear_reason();
  return probe;
}

// tiny's MoE layer on fused_gemv at tp x ep, MEASURED, one trial per batch.
v1::SweepSpec MeasuredSpec(int tp, int ep, std::vector<int> batches = {1}) {
  v1::SweepSpec spec;
  spec.set_name("gang");
  spec.mutable_workload()->set_model_preset("tiny");
  for (int b : batches) spec.mutable_workload()->add_batch_sizes(b);
  spec.mutable_workload()->add_context_lengths(16);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  spec.mutable_space()->add_moe_backends("fused_gemv");
  spec.mutable_space()->add_tp(tp);
  spec.mutable_space()->add_ep(ep);
  spec.mutable_space()->add_communication(v1::MEASURED);
  spec.mutable_measurement()->set_max_attempts(2);
  return spec;
}

struct Worker {
  std::string id;
  std::string token;
};

class GangSchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *db::Store::Open(":memory:");
    Start();
  }
  // A coordinator (again) on the fixture's store.
  void Start() {
    registry_ = std::make_unique<WorkerRegistry>(&clock_, kLeaseMs);
    scheduler_ = std::make_unique<Scheduler>(
        store_.get(), registry_.get(), &clock_,
        SchedulerOptions{kLeaseMs, 100, /*unavailable_grace_ms=*/0});
  }
  Worker Register(const std::string& name, const v1::Probe& probe,
                  const Worker* previous = nullptr) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    *request.mutable_probe() = probe;
    if (previous != nullptr) {
      request.set_previous_worker_id(previous->id);
      request.set_previous_token(previous->token);
    }
    const auto response = scheduler_->RegisterWorker(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return {response->worker_id(), response->token()};
  }
  // `n` GPU workers on `host`, each having asked once (idle).
  std::vector<Worker> IdleGpus(const std::string& host, int n) {
    std::vector<Worker> workers;
    for (int i = 0; i < n; ++i) {
      workers.push_back(Register(absl::StrCat(host, ":", i), GpuProbe(host)));
      EXPECT_FALSE(Acquire(workers.back()).granted());
    }
    return workers;
  }
  v1::AcquireTrialResponse Acquire(const Worker& worker) {
    const auto response = scheduler_->Acquire(worker.id, worker.token);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::AcquireTrialResponse();
  }
  bool Beat(const Worker& worker, int64_t trial_id) {
    v1::HeartbeatRequest beat;
    beat.set_worker_id(worker.id);
    beat.set_token(worker.token);
    beat.set_current_trial_id(trial_id);
    return scheduler_->Heartbeat(beat)->cancel_trial();
  }
  v1::ReportResultResponse Report(const Worker& worker, const v1::Trial& trial,
                                  v1::TrialState outcome,
                                  const std::string& reason = "") {
    v1::ReportResultRequest request =
        DoneReport(trial, worker.token, {10, 11, 12}, 11, "fp-gpu");
    request.set_worker_id(worker.id);
    request.mutable_result()->set_outcome(outcome);
    request.mutable_result()->set_reason(reason);
    const auto response = scheduler_->Report(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::ReportResultResponse();
  }
  int64_t Submit(const v1::SweepSpec& spec) {
    const auto submitted = scheduler_->Submit(spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->sweep_id() : 0;
  }
  v1::Trial Trial(int64_t id) { return *store_->GetTrial(id); }
  // A gang of `members` on the first trial, every grant picked up; returns
  // the trial as granted.
  v1::Trial FormAndPickUp(const std::vector<Worker>& members) {
    const v1::AcquireTrialResponse first = Acquire(members[0]);
    EXPECT_TRUE(first.granted());
    for (size_t r = 1; r < members.size(); ++r) {
      const v1::AcquireTrialResponse grant = Acquire(members[r]);
      EXPECT_TRUE(grant.granted());
      EXPECT_EQ(grant.gang().rank(), static_cast<int>(r));
    }
    return first.trial();
  }

  FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(GangSchedulingTest, GrantedToTheWholeGangAtOnceAndDecidedTogether) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));
  const v1::AcquireTrialResponse rank0 = Acquire(w[0]);
  ASSERT_TRUE(rank0.granted());
  EXPECT_EQ(rank0.gang().rank(), 0);
  EXPECT_EQ(rank0.gang().world_size(), 2);
  EXPECT_THAT(rank0.gang().worker_ids(), ElementsAre(w[0].id, w[1].id));
  // The other member's grant waits for its next Acquire: the same trial.
  const v1::AcquireTrialResponse rank1 = Acquire(w[1]);
  ASSERT_TRUE(rank1.granted());
  EXPECT_EQ(rank1.trial().trial_id(), rank0.trial().trial_id());
  EXPECT_EQ(rank1.gang().gang_id(), rank0.gang().gang_id());
  EXPECT_EQ(rank1.gang().rank(), 1);
  // A worker the gang holds gets nothing else.
  EXPECT_FALSE(Acquire(w[1]).granted());
  EXPECT_FALSE(Beat(w[0], rank0.trial().trial_id()));
  EXPECT_FALSE(Beat(w[1], rank0.trial().trial_id()));
  // Rank 1's DONE is held until rank 0's arrives; rank 0's is recorded.
  EXPECT_TRUE(Report(w[1], rank0.trial(), v1::DONE).accepted());
  EXPECT_EQ(Trial(rank0.trial().trial_id()).state(), v1::LEASED);
  EXPECT_TRUE(Report(w[0], rank0.trial(), v1::DONE).accepted());
  const v1::Trial done = Trial(rank0.trial().trial_id());
  EXPECT_EQ(done.state(), v1::DONE);
  EXPECT_EQ(done.result().world_size(), 2);
  EXPECT_EQ(done.result().worker_id(), w[0].id);
}

// A measured world of one: a gang of the asker alone (what one GPU can
// measure of the gang's path), granted and decided like any gang.
TEST_F(GangSchedulingTest, AGangOfOneIsTheAskerAlone) {
  const Worker w = IdleGpus("host-a", 1)[0];
  Submit(MeasuredSpec(1, 1));
  const v1::AcquireTrialResponse modelled = Acquire(w);
  ASSERT_TRUE(modelled.granted());
  EXPECT_FALSE(modelled.has_gang());
  EXPECT_TRUE(Report(w, modelled.trial(), v1::DONE).accepted());
  const v1::AcquireTrialResponse gang = Acquire(w);
  ASSERT_TRUE(gang.granted());
  EXPECT_EQ(gang.trial().config().communication(), v1::MEASURED);
  EXPECT_EQ(gang.gang().rank(), 0);
  EXPECT_EQ(gang.gang().world_size(), 1);
  EXPECT_THAT(gang.gang().worker_ids(), ElementsAre(w.id));
  EXPECT_TRUE(Report(w, gang.trial(), v1::DONE).accepted());
  const v1::Trial done = Trial(gang.trial().trial_id());
  EXPECT_EQ(done.state(), v1::DONE);
  EXPECT_EQ(done.result().world_size(), 1);
}

TEST_F(GangSchedulingTest, NoPartialGangAndUnavailableWithTheLargestHost) {
  const Worker a = IdleGpus("host-a", 1)[0];
  IdleGpus("host-b", 1);
  const int64_t sweep = Submit(MeasuredSpec(2, 1));
  EXPECT_FALSE(Acquire(a).granted());  // one worker per host: no gang
  const v1::Trial queued = store_->QueryTrials(v1::TrialFilter())->front();
  EXPECT_EQ(queued.state(), v1::QUEUED);
  ASSERT_TRUE(scheduler_->MarkUnavailableTrials().ok());
  const v1::Trial unavailable = Trial(queued.trial_id());
  EXPECT_EQ(unavailable.state(), v1::UNAVAILABLE);
  EXPECT_EQ(unavailable.reason(),
            "MEASURED tp2 x ep1 unavailable: needs 2 GPU workers with "
            "fused_gemv on one host; the largest host has 1");
  EXPECT_EQ(store_->GetSweep(sweep)->state(), v1::FINISHED);
}

TEST_F(GangSchedulingTest, CpuWorkersNeverFormGangsAndTheRestStillRuns) {
  const Worker worker = Register("host:cpu", CpuWorkerProbe());
  v1::SweepSpec spec = MeasuredSpec(2, 1);
  spec.mutable_space()->set_moe_backends(0, "cpu_reference");
  spec.mutable_space()->add_communication(v1::MODELLED);  // after MEASURED
  Submit(spec);
  // The MEASURED trial comes first and is passed over.
  const v1::AcquireTrialResponse modelled = Acquire(worker);
  ASSERT_TRUE(modelled.granted());
  EXPECT_NE(modelled.trial().config().communication(), v1::MEASURED);
  EXPECT_FALSE(modelled.has_gang());
  ASSERT_TRUE(scheduler_->MarkUnavailableTrials().ok());
  v1::TrialFilter filter;
  filter.set_state(v1::UNAVAILABLE);
  const std::vector<v1::Trial> unavailable = *store_->QueryTrials(filter);
  ASSERT_EQ(unavailable.size(), 1u);
  EXPECT_THAT(unavailable[0].reason(),
              HasSubstr("MEASURED communication needs GPU workers"));
  EXPECT_TRUE(Report(worker, modelled.trial(), v1::DONE).accepted());
}

TEST_F(GangSchedulingTest, TheAskersHostWhenItHasAsManyLongestWaitingFirst) {
  std::vector<Worker> a = IdleGpus("host-a", 3);
  IdleGpus("host-b", 3);
  Submit(MeasuredSpec(2, 1));
  const v1::AcquireTrialResponse grant = Acquire(a[2]);
  ASSERT_TRUE(grant.granted());
  EXPECT_THAT(grant.gang().worker_ids(), ElementsAre(a[2].id, a[0].id));
}

// The host with the most idle workers gets the gang, even when a worker of
// another host asked: its members pick their grants up when they ask.
TEST_F(GangSchedulingTest, TheHostWithTheMostIdleWorkersIsPreferred) {
  std::vector<Worker> a = IdleGpus("host-a", 2);
  std::vector<Worker> b = IdleGpus("host-b", 3);
  Submit(MeasuredSpec(2, 1));
  EXPECT_FALSE(Acquire(a[1]).granted());
  const v1::AcquireTrialResponse rank0 = Acquire(b[0]);
  ASSERT_TRUE(rank0.granted());
  EXPECT_EQ(rank0.gang().rank(), 0);
  EXPECT_THAT(rank0.gang().worker_ids(), ElementsAre(b[0].id, b[1].id));
  EXPECT_EQ(Acquire(b[1]).gang().rank(), 1);
  EXPECT_FALSE(Acquire(b[2]).granted());
}

TEST_F(GangSchedulingTest, SilentMemberTearsDownAndRequeuesWhole) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));
  const v1::Trial trial = FormAndPickUp(w);
  clock_.AdvanceMs(kLeaseMs + 1);
  EXPECT_FALSE(Beat(w[0], trial.trial_id()));  // rank 1 stays silent
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial requeued = Trial(trial.trial_id());
  EXPECT_EQ(requeued.state(), v1::QUEUED);
  EXPECT_THAT(
      requeued.reason(),
      HasSubstr(absl::StrCat("rank 1 (worker ", w[1].id, ") went silent")));
  // Rank 0 is told to stop, and its rendezvous says why.
  EXPECT_TRUE(Beat(w[0], trial.trial_id()));
  v1::RendezvousRequest meet;
  meet.set_worker_id(w[0].id);
  meet.set_token(w[0].token);
  meet.set_gang_id(absl::StrCat("trial-", trial.trial_id(), "-attempt-1"));
  meet.set_key("nccl-id");
  const auto torn = scheduler_->Rendezvous(meet);
  ASSERT_TRUE(torn.ok()) << torn.status();
  EXPECT_TRUE(torn->torn_down());
  EXPECT_THAT(torn->reason(), HasSubstr("went silent"));
  // Its late report is refused; once rank 1 is back, the next gang runs
  // attempt 2.
  EXPECT_FALSE(Report(w[0], trial, v1::DONE).accepted());
  Beat(w[1], 0);
  EXPECT_FALSE(Acquire(w[1]).granted());  // rank 0 has not asked again yet
  EXPECT_EQ(FormAndPickUp(w).attempt(), 2);
}

TEST_F(GangSchedulingTest, AGangLostAfterCancelEndsCancelledNotRequeued) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  const int64_t sweep_id = Submit(MeasuredSpec(2, 1));
  const v1::Trial trial = FormAndPickUp(w);
  ASSERT_TRUE(scheduler_->Cancel(sweep_id).ok());
  clock_.AdvanceMs(kLeaseMs + 1);
  EXPECT_TRUE(Beat(w[0], trial.trial_id()));  // told to stop; rank 1 silent
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial cancelled = Trial(trial.trial_id());
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  EXPECT_THAT(cancelled.reason(),
              HasSubstr(absl::StrCat("sweep cancelled; rank 1 (worker ",
                                     w[1].id, ") went silent")));
  EXPECT_FALSE(Acquire(w[0]).granted());
}

TEST_F(GangSchedulingTest, GrantNotPickedUpWithinTheLeaseTearsDown) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));
  const v1::Trial trial = Acquire(w[0]).trial();
  clock_.AdvanceMs(kLeaseMs / 2);
  Beat(w[0], trial.trial_id());
  Beat(w[1], 0);  // alive, but never asks for its grant
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(Trial(trial.trial_id()).state(), v1::LEASED);
  clock_.AdvanceMs(kLeaseMs / 2 + 1);
  Beat(w[0], trial.trial_id());
  Beat(w[1], 0);
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(Trial(trial.trial_id()).state(), v1::QUEUED);
  EXPECT_THAT(Trial(trial.trial_id()).reason(),
              HasSubstr("did not pick up its grant within the lease"));
}

TEST_F(GangSchedulingTest, PastMaxAttemptsFailsNamingTheRankAndWorker) {
  std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));  // max_attempts 2
  int64_t trial_id = 0;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    trial_id = FormAndPickUp(w).trial_id();
    // Rank 1 registers again (a restarted worker process).
    w[1] = Register("host-a:1", GpuProbe("host-a"), &w[1]);
    EXPECT_FALSE(Acquire(w[1]).granted());
  }
  const v1::Trial failed = Trial(trial_id);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr("rank 1 (worker "));
  EXPECT_THAT(failed.reason(), HasSubstr("registered again"));
  EXPECT_THAT(failed.reason(), HasSubstr("lost 2 times"));
}

TEST_F(GangSchedulingTest, ARankFailureIsTheOutcomeAndStopsTheOthers) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));
  const v1::Trial trial = FormAndPickUp(w);
  EXPECT_TRUE(
      Report(w[1], trial, v1::FAILED, "ncclCommInitRank: unhandled error")
          .accepted());
  const v1::Trial failed = Trial(trial.trial_id());
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.reason(), absl::StrCat("rank 1 (worker ", w[1].id,
                                          "): ncclCommInitRank: unhandled "
                                          "error"));
  EXPECT_TRUE(Beat(w[0], trial.trial_id()));
  const v1::ReportResultResponse late = Report(w[0], trial, v1::DONE);
  EXPECT_FALSE(late.accepted());
  EXPECT_TRUE(late.duplicate());  // the attempt is decided: stop offering
}

// Three workers, two gang trials of two: one gang forms, the third worker
// waits (holding nothing), and the second gang forms when the first ends.
TEST_F(GangSchedulingTest, CompetingGangsShareNoWorkerAndNeverDeadlock) {
  const std::vector<Worker> w = IdleGpus("host-a", 3);
  const int64_t sweep = Submit(MeasuredSpec(2, 1, {1, 2}));
  std::set<std::string> busy;
  int finished = 0;
  for (int round = 0; round < 20 && finished < 2; ++round) {
    for (const Worker& worker : w) {
      const v1::AcquireTrialResponse grant = Acquire(worker);
      if (!grant.granted()) continue;
      EXPECT_TRUE(busy.insert(worker.id).second) << "shared " << worker.id;
      if (grant.gang().rank() != 1) continue;
      // The gang is whole: both ranks report, and both are free again.
      for (const std::string& id : grant.gang().worker_ids()) {
        const Worker& member = *std::find_if(
            w.begin(), w.end(), [&](const Worker& x) { return x.id == id; });
        Report(member, grant.trial(), v1::DONE);
        busy.erase(id);
      }
      ++finished;
    }
  }
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(store_->GetSweep(sweep)->state(), v1::FINISHED);
}

TEST_F(GangSchedulingTest, RestartRequeuesLeasedGangTrialsWhole) {
  const std::vector<Worker> w = IdleGpus("host-a", 2);
  Submit(MeasuredSpec(2, 1));
  const v1::Trial trial = FormAndPickUp(w);
  Start();  // a new coordinator on the same database
  ASSERT_TRUE(scheduler_->RestoreWorkers().ok());
  ASSERT_TRUE(scheduler_->ResumeSweeps().ok());
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const v1::Trial requeued = Trial(trial.trial_id());
  EXPECT_EQ(requeued.state(), v1::QUEUED);
  EXPECT_THAT(requeued.reason(), HasSubstr("before the coordinator restarted"));
  // The old ranks are stopped and their reports refused.
  EXPECT_TRUE(Beat(w[0], trial.trial_id()));
  EXPECT_TRUE(Beat(w[1], trial.trial_id()));
  EXPECT_FALSE(Report(w[0], trial, v1::DONE).accepted());
  // They form a new gang for attempt 2 and finish it.
  EXPECT_FALSE(Acquire(w[1]).granted());
  const v1::Trial again = FormAndPickUp(w);
  EXPECT_EQ(again.attempt(), 2);
  Report(w[0], again, v1::DONE);
  Report(w[1], again, v1::DONE);
  EXPECT_EQ(Trial(trial.trial_id()).state(), v1::DONE);
}

}  // namespace
}  // namespace moetune::coordinator
