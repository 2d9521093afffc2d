// Scheduler: the coordinator's logic between the gRPC services and the
// store. Submits sweeps (validate, expand through the tuner's strategy,
// record), hands trials to workers whose probe says the trial's backend is
// available (and records a trial UNAVAILABLE, with the workers' reasons, when
// no live worker has it), renews and expires leases, records results
// idempotently, cancels sweeps and notices when one is finished. All writes
// go through the one Store (the coordinator is the database's only writer).
// Thread-safe: one mutex serialises scheduling decisions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/device_bandwidth.h"
#include "coordinator/registry.h"
#include "db/store.h"
#include "proto/moetune.pb.h"
#include "tuner/sweep_plan.h"

namespace moetune::coordinator {

struct SchedulerOptions {
  int64_t lease_ms = 10000;  // a lease lapses this long after a heartbeat
  int heartbeat_interval_ms = 1000;
  // A queued trial is judged unavailable only after it (and the coordinator)
  // has waited this long (ms), so that a worker starting a moment after
  // another, or after the submit, can still claim its backends.
  int64_t unavailable_grace_ms = 2000;
};

class Scheduler {
 public:
  Scheduler(db::Store* store, WorkerRegistry* registry, const Clock* clock,
            SchedulerOptions options);

  // A non-empty request_id makes the submit idempotent: a second submit
  // with it returns the first one's sweep.
  absl::StatusOr<v1::SubmitSweepResponse> Submit(
      const v1::SweepSpec& spec, const std::string& request_id = "");
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request);
  v1::HeartbeatResponse Heartbeat(const v1::HeartbeatRequest& request);
  // A granted trial, or none now (nothing this worker can run).
  // UNAUTHENTICATED unless the token is the registration's.
  absl::StatusOr<v1::AcquireTrialResponse> Acquire(const std::string& worker_id,
                                                   const std::string& token);
  absl::StatusOr<v1::ReportResultResponse> Report(
      const v1::ReportResultRequest& request);
  absl::StatusOr<v1::Sweep> Cancel(int64_t sweep_id);
  // Re-queues (or fails, past max attempts) trials whose worker went silent,
  // and those whose worker's heartbeats say it no longer runs them (it gave
  // up delivering the result).
  absl::Status ExpireLeases();
  // After a restart: honours the recent registrations kept in the database.
  absl::Status RestoreWorkers();
  // Records queued trials UNAVAILABLE, with each live worker's reason, when
  // live workers exist and none of them has the trial's backend, once the
  // trial has waited unavailable_grace_ms. Trials wait while no worker is up:
  // nothing is known about what they could run.
  absl::Status MarkUnavailableTrials();
  // After a coordinator restart: lets each RUNNING sweep's strategy pick up
  // from what the database holds (finished trials never run again; missing
  // proposals are added; a sweep with nothing left is finished).
  absl::Status ResumeSweeps();
  // Bumped whenever a trial reaches a final state or a sweep changes state.
  int64_t event_version() const;
  // Blocks until event_version() > seen or the timeout passes.
  int64_t WaitForEvent(int64_t seen, int64_t timeout_ms) const;
  // Wakes every WaitForEvent (the server is shutting down).
  void WakeWaiters() { Notify(); }

 private:
  // Why no live worker can run `backend` ("" when one can).
  std::string UnavailableReason(const std::string& backend) const;
  // Re-queues, or fails past its attempts, a LEASED trial that lost its
  // worker for `why`.
  absl::Status LoseLease(const v1::Trial& trial, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the trial's lease is lost ("" when it is not): its worker is silent,
  // or heard not to run it any more.
  std::string LostLeaseReason(const v1::Trial& trial) const;
  absl::Status ReleaseLeasesOf(const std::string& worker_id,
                               const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The response refusing `request` (or naming it a duplicate); none when it
  // comes from the current lease holder.
  absl::StatusOr<std::optional<v1::ReportResultResponse>> RefuseReport(
      const v1::Trial& trial, const v1::ReportResultRequest& request);
  absl::StatusOr<std::optional<v1::SubmitSweepResponse>> ExistingSubmit(
      const std::string& request_id);
  bool DueForTouch(const std::string& worker_id);
  bool DueForExpiry();
  static bool WorkerHasBackend(const WorkerEntry& worker,
                               const std::string& backend);
  // The sweep's plan: made at submission, or from its stored normalised
  // spec after a restart; dropped when the sweep finishes.
  const tuner::SweepPlan& PlanOf(const v1::Sweep& sweep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AdvanceSweep(int64_t sweep_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AcceptWinners(int64_t sweep_id,
                             const std::vector<v1::Trial>& trials);
  void Notify();

  db::Store* store_;
  WorkerRegistry* registry_;
  // The best probe per kind of device: every result's floor is recorded
  // against it (device_bandwidth.h says why).
  DeviceBandwidths bandwidths_;
  const Clock* clock_;
  const SchedulerOptions options_;
  const int64_t started_ms_;  // when this coordinator started
  absl::Mutex mu_;            // serialises acquire/report/expire decisions
  std::map<int64_t, std::shared_ptr<const tuner::SweepPlan>> plans_
      ABSL_GUARDED_BY(mu_);
  absl::Mutex touch_mu_;
  std::map<std::string, int64_t> touched_ms_ ABSL_GUARDED_BY(touch_mu_);
  std::atomic<int64_t> last_expiry_ms_{0};
  mutable absl::Mutex event_mu_;
  int64_t event_version_ ABSL_GUARDED_BY(event_mu_) = 0;
};

}  // namespace moetune::coordinator
