// Scheduler: the coordinator's logic between the gRPC services and the
// store. Submits sweeps (validate, expand through the tuner's strategy,
// record), hands trials to workers whose probe says the trial's backend is
// available (and records a trial UNAVAILABLE, with the workers' reasons, when
// no live worker has it), renews and expires leases, records results
// idempotently, cancels sweeps and notices when one is finished. All writes
// go through the one Store (the coordinator is the database's only writer).
// A MEASURED trial of world tp * ep > 1 runs on a gang of that many GPU
// workers on one host (gangs.h, gang_placement.h; the gang member functions
// are in scheduler_gangs.cc): granted together, re-queued whole when a
// member is lost, decided by its ranks' reports together.
// Thread-safe: one mutex serialises scheduling decisions.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/device_bandwidth.h"
#include "coordinator/gang_placement.h"
#include "coordinator/gangs.h"
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
  // known=false for an id this coordinator does not hold (the worker
  // registers again); UNAUTHENTICATED for a held id with the wrong token.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request);
  // A granted trial, or none now (nothing this worker can run).
  // UNAUTHENTICATED unless the token is the registration's.
  absl::StatusOr<v1::AcquireTrialResponse> Acquire(const std::string& worker_id,
                                                   const std::string& token);
  absl::StatusOr<v1::ReportResultResponse> Report(
      const v1::ReportResultRequest& request);
  // A gang's all-gather of bytes (gangs.h): blocks up to the request's
  // wait_ms (at most 10 s) without holding the scheduling mutex.
  // UNAUTHENTICATED unless the token is the registration's.
  absl::StatusOr<v1::RendezvousResponse> Rendezvous(
      const v1::RendezvousRequest& request);
  absl::StatusOr<v1::Sweep> Cancel(int64_t sweep_id);
  // Re-queues (or fails, past max attempts) trials whose worker went silent,
  // and those whose worker's heartbeats say it no longer runs them (it gave
  // up delivering the result); a cancelled sweep's such trials are
  // CANCELLED instead.
  absl::Status ExpireLeases();
  // The worker called `name` has stopped for good and no report of it can
  // come (the CLI's embedded worker, reaped, its coordinator stopping after
  // it): what every registration of that name holds is lost now, for `why`,
  // as it would be once its lease lapsed, which this coordinator will not
  // be there to see. A cancelled sweep's trial ends CANCELLED, a running
  // sweep's is re-queued for a later run.
  absl::Status ReleaseStoppedWorker(const std::string& name,
                                    const std::string& why);
  // After a restart: honours the recent registrations kept in the database.
  absl::Status RestoreWorkers();
  // Records queued trials UNAVAILABLE, with each live worker's reason, when
  // live workers exist and none of them has the trial's backend, once the
  // trial has waited unavailable_grace_ms. Trials wait while no worker is up:
  // nothing is known about what they could run. A MEASURED trial is also
  // UNAVAILABLE when no host has enough live GPU workers with its backend
  // for its gang (GangShortfall says why).
  absl::Status MarkUnavailableTrials();
  // Whether a live registration carries `name`.
  bool HasLiveWorker(const std::string& name) const;
  // Every worker that will ever serve this coordinator has registered (an
  // embedded cluster's, all up; nothing else can reach it): trials none of
  // them can run end UNAVAILABLE at the next tick, not after the grace.
  void NoMoreWorkersExpected();
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
  // Told of each result recorded, with the reporting worker's name (a gang's
  // rank 0 for a gang trial): the metrics' trial durations and busy time.
  // Called under the scheduling mutex, so it must not call the scheduler.
  using ResultObserver = std::function<void(const std::string& worker_name,
                                            const v1::TrialResult& result)>;
  void SetResultObserver(ResultObserver observer);

 private:
  // Why no live worker can run `backend` ("" when one can).
  std::string UnavailableReason(const std::string& backend) const;
  // Re-queues, or fails past its attempts, a LEASED trial that lost its
  // worker for `why`; cancels it when its sweep was cancelled.
  absl::Status LoseLease(const v1::Trial& trial, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the trial's lease is lost ("" when it is not): its worker is silent,
  // or heard not to run it any more.
  std::string LostLeaseReason(const v1::Trial& trial) const;
  absl::Status ReleaseLeasesOf(const std::string& worker_id,
                               const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The oldest queued trial this worker can take now: a solo one, or a
  // gang trial whose gang forms with it as rank 0.
  absl::StatusOr<v1::AcquireTrialResponse> NextTrialFor(
      const WorkerEntry& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases `trial` (QUEUED, as read) to `worker_id`.
  absl::StatusOr<v1::AcquireTrialResponse> Grant(v1::Trial trial,
                                                 const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ------------------------------------------ gangs (scheduler_gangs.cc) --
  // The members of a gang for `trial` by rank (gang_placement.h: `worker`
  // asks, and is rank 0 when its host is chosen), or none.
  std::vector<std::string> PlaceFor(const v1::Trial& trial,
                                    const WorkerEntry& worker, int world)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases the trial to rank 0 and forms the gang: the asker's grant when
  // it is rank 0, else none (the members pick theirs up when they ask).
  absl::StatusOr<v1::AcquireTrialResponse> FormGang(
      const v1::Trial& trial, const std::vector<std::string>& members,
      const std::string& asker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The grant of a gang formed while this worker was not asking.
  absl::StatusOr<v1::AcquireTrialResponse> GangGrant(int64_t trial_id,
                                                     const v1::Gang& gang);
  // Why the trial's gang is lost ("" when it is not): a member silent, one
  // that never picked up its grant, one no longer running it, or no gang
  // at all (formed before this coordinator started).
  std::string GangLostReason(const v1::Trial& trial) const;
  // Tears the gang down and re-queues its trial whole (or fails it).
  absl::Status LoseGang(const v1::Trial& trial, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the gangs a re-registered worker was in.
  absl::Status ReleaseGangOf(const v1::Trial& trial,
                             const std::string& worker_id,
                             const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::ReportResultResponse> ReportGangRank(
      const v1::Trial& trial, const v1::ReportResultRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::ReportResultResponse> RecordGangOutcome(
      const v1::Trial& trial, v1::TrialResult stored,
      const std::string& end_reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MarkUnavailableGangTrials() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MarkGangTrialsOf(int64_t sweep_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Live workers as gang placement sees them, for `backend`.
  std::vector<GangCandidate> Candidates(const std::string& backend) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a final state that comes without a result (FAILED, UNAVAILABLE,
  // CANCELLED) for `reason`, logs it and advances its sweep.
  absl::Status EndWithoutResult(const v1::Trial& trial, v1::TrialState state,
                                const std::string& reason, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a reported result (re-floored at the best bandwidth of its kind
  // of device), logs it and advances its sweep; duplicate when already
  // recorded.
  absl::StatusOr<v1::ReportResultResponse> RecordReported(
      const v1::Trial& trial, v1::TrialResult stored)
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
  // The native backends and the plugin backends the live workers' probes
  // offer: what a submitted spec may name.
  tuner::BackendCatalog OfferedBackends() const;
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
  // options_.unavailable_grace_ms until NoMoreWorkersExpected.
  int64_t unavailable_grace_ms_ ABSL_GUARDED_BY(mu_);
  const int64_t started_ms_;  // when this coordinator started
  absl::Mutex mu_;            // serialises acquire/report/expire decisions
  ResultObserver result_observer_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<const tuner::SweepPlan>> plans_
      ABSL_GUARDED_BY(mu_);
  // Whether a sweep's plan has MEASURED configs (memo of its plan).
  std::map<int64_t, bool> has_gangs_ ABSL_GUARDED_BY(mu_);
  GangTable gangs_;
  // Since when each worker has been asking for work and getting none (from
  // its first empty answer after a grant): who is idle, longest waiting
  // first, for gang placement.
  std::map<std::string, int64_t> idle_since_ms_ ABSL_GUARDED_BY(mu_);
  absl::Mutex touch_mu_;
  std::map<std::string, int64_t> touched_ms_ ABSL_GUARDED_BY(touch_mu_);
  std::atomic<int64_t> last_expiry_ms_{0};
  mutable absl::Mutex event_mu_;
  int64_t event_version_ ABSL_GUARDED_BY(event_mu_) = 0;
};

}  // namespace moetune::coordinator
