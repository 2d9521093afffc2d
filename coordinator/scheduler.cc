#include "coordinator/scheduler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/text_bounds.h"
#include "coordinator/identity.h"
#include "coordinator/trial_log.h"
#include "tuner/search.h"
#include "tuner/strategy.h"
#include "tuner/sweep_plan.h"
#include "tuner/winner.h"

namespace moetune::coordinator {
namespace {

// A spec must give its strategy something to run: a space with points, and
// a budget that leaves each workload at least one trial.
absl::Status CheckProposesWork(const tuner::SweepPlan& plan,
                               const std::vector<v1::Trial>& first) {
  if (!first.empty()) return absl::OkStatus();
  if (plan.point_count() == 0) {
    return absl::InvalidArgumentError(
        "space: no listed backend can run the workload at any listed tile, "
        "(tp, ep) and batch (see space.world_size, space.tiles, each "
        "backend's batch limit in `moetune probe`, and for DECODE_STEP "
        "whether tp * ep divides the model's heads, vocabulary and dense "
        "MLP)");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy: the budget proposes no trial for a space of ",
      plan.point_count(), " points over ", plan.workload_count(),
      " workloads (max_trials ", plan.spec().strategy().max_trials(),
      " is split evenly between workloads)"));
}

// Trials of the sweep still QUEUED or LEASED.
int64_t OpenTrials(const v1::Sweep& sweep) {
  int64_t open = 0;
  for (const char* state : {"QUEUED", "LEASED"}) {
    auto it = sweep.trial_counts().find(state);
    if (it != sweep.trial_counts().end()) open += it->second;
  }
  return open;
}

}  // namespace

Scheduler::Scheduler(db::Store* store, WorkerRegistry* registry,
                     const Clock* clock, SchedulerOptions options)
    : store_(store),
      registry_(registry),
      clock_(clock),
      options_(options),
      unavailable_grace_ms_(options.unavailable_grace_ms),
      started_ms_(clock->NowUnixMs()) {}

absl::StatusOr<std::optional<v1::SubmitSweepResponse>>
Scheduler::ExistingSubmit(const std::string& request_id) {
  if (request_id.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id: ", request_id.size(),
                     " characters; allowed: at most 128"));
  }
  RETURN_IF_ERROR(CheckPrintable(request_id, "request_id", 128));
  ASSIGN_OR_RETURN(const std::optional<int64_t> sweep_id,
                   store_->SweepForRequest(request_id));
  if (!sweep_id.has_value()) return std::optional<v1::SubmitSweepResponse>();
  ASSIGN_OR_RETURN(const v1::Sweep sweep, store_->GetSweep(*sweep_id));
  v1::SubmitSweepResponse response;
  response.set_sweep_id(sweep.sweep_id());
  response.set_trial_count(sweep.total_trials());
  return std::optional<v1::SubmitSweepResponse>(response);
}

absl::StatusOr<v1::SubmitSweepResponse> Scheduler::Submit(
    const v1::SweepSpec& spec, const std::string& request_id) {
  // A retried submit gets the sweep its first attempt created.
  ASSIGN_OR_RETURN(std::optional<v1::SubmitSweepResponse> existing,
                   ExistingSubmit(request_id));
  if (existing.has_value()) return *existing;
  // Validated, defaulted and expanded once, here: a rejected spec records
  // nothing, and the plan serves the sweep for its life.
  ASSIGN_OR_RETURN(std::shared_ptr<const tuner::SweepPlan> plan,
                   tuner::SweepPlan::Create(spec, OfferedBackends()));
  ASSIGN_OR_RETURN(std::unique_ptr<tuner::Strategy> strategy,
                   tuner::MakeStrategy(plan->spec().strategy()));
  std::vector<v1::Trial> trials = strategy->Propose(*plan, {});
  RETURN_IF_ERROR(CheckProposesWork(*plan, trials));
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int64_t> created = store_->CreateSweep(
      plan->spec(), &trials, clock_->NowUnixMs(), request_id);
  if (absl::IsAlreadyExists(created.status())) {
    ASSIGN_OR_RETURN(existing, ExistingSubmit(request_id));  // a racing twin
    if (existing.has_value()) return *existing;
  }
  ASSIGN_OR_RETURN(const int64_t sweep_id, std::move(created));
  plans_[sweep_id] = plan;
  v1::SubmitSweepResponse response;
  response.set_sweep_id(sweep_id);
  response.set_trial_count(static_cast<int32_t>(trials.size()));
  LogInfo("sweep ", sweep_id, " '", plan->spec().name(), "': ", trials.size(),
          " trials of a space of ", plan->point_count(), " points");
  Notify();
  return response;
}

tuner::BackendCatalog Scheduler::OfferedBackends() const {
  std::vector<v1::Probe> probes;
  for (const WorkerEntry& worker : registry_->AliveWorkers()) {
    probes.push_back(worker.probe);
  }
  return tuner::BackendCatalog::FromProbes(probes);
}

const tuner::SweepPlan& Scheduler::PlanOf(const v1::Sweep& sweep) {
  std::shared_ptr<const tuner::SweepPlan>& plan = plans_[sweep.sweep_id()];
  if (plan == nullptr) plan = tuner::SweepPlan::FromNormalized(sweep.spec());
  return *plan;
}

absl::StatusOr<v1::RegisterWorkerResponse> Scheduler::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  if (request.name().empty()) {
    return absl::InvalidArgumentError("name: must not be empty (host:device)");
  }
  RETURN_IF_ERROR(CheckPrintable(request.name(), "name", kMaxNameBytes));
  RETURN_IF_ERROR(CheckPrintable(request.probe().device().host_id(),
                                 "probe.device.host_id", kMaxNameBytes));
  const Registration registration =
      registry_->Register(request.name(), request.probe());
  bandwidths_.Note(request.probe());
  RETURN_IF_ERROR(store_->UpsertWorker(registration.worker_id, request.name(),
                                       request.probe(), clock_->NowUnixMs(),
                                       TokenDigest(registration.token)));
  // Registering again: what the previous registration held is released now
  // rather than lapsing with its lease.
  if (!request.previous_worker_id().empty() &&
      registry_->Authenticate(request.previous_worker_id(),
                              request.previous_token())) {
    absl::MutexLock lock(&mu_);
    registry_->Forget(request.previous_worker_id());
    RETURN_IF_ERROR(
        ReleaseLeasesOf(request.previous_worker_id(),
                        absl::StrCat("its worker registered again as ",
                                     registration.worker_id)));
  }
  v1::RegisterWorkerResponse response;
  response.set_worker_id(registration.worker_id);
  response.set_token(registration.token);
  response.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  response.set_lease_ms(static_cast<int32_t>(options_.lease_ms));
  LogInfo("worker ", registration.worker_id, " registered");
  return response;
}

absl::Status Scheduler::RestoreWorkers() {
  ASSIGN_OR_RETURN(
      const std::vector<db::WorkerIdentity> identities,
      store_->WorkerIdentities(clock_->NowUnixMs() - options_.lease_ms));
  registry_->Restore(identities);
  ASSIGN_OR_RETURN(const std::vector<v1::WorkerInfo> workers,
                   store_->ListWorkers());
  for (const v1::WorkerInfo& worker : workers) bandwidths_.Note(worker.probe());
  return absl::OkStatus();
}

// The database keeps a worker's last heartbeat only for a restart (which
// honours registrations heard within a lease), so a quarter lease of
// precision will do: one write per worker per lease / 4, not per beat.
bool Scheduler::DueForTouch(const std::string& worker_id) {
  const int64_t now = clock_->NowUnixMs();
  absl::MutexLock lock(&touch_mu_);
  int64_t& last = touched_ms_[worker_id];
  if (last != 0 && now - last < options_.lease_ms / 4) return false;
  last = now;
  return true;
}

// Whether Acquire should look for lapsed leases itself: at most every
// 100 ms (the background tick does it too), not on every one of many
// workers' polls.
bool Scheduler::DueForExpiry() {
  const int64_t now = clock_->NowUnixMs();
  int64_t last = last_expiry_ms_.load();
  return now - last >= 100 &&
         last_expiry_ms_.compare_exchange_strong(last, now);
}

absl::StatusOr<v1::HeartbeatResponse> Scheduler::Heartbeat(
    const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  response.set_known(registry_->Heartbeat(request.worker_id(), request.token(),
                                          request.current_trial_id()));
  if (!response.known() && registry_->Get(request.worker_id()).has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat("worker_id/token: '", request.worker_id(),
                     "' is registered with another token"));
  }
  if (response.known() && DueForTouch(request.worker_id())) {
    (void)store_->TouchWorker(request.worker_id(), clock_->NowUnixMs());
  }
  if (response.known() && request.current_trial_id() != 0) {
    // CancelSweep cancels queued trials at once; a running one learns here.
    absl::StatusOr<v1::Trial> trial =
        store_->GetTrial(request.current_trial_id());
    absl::StatusOr<v1::Sweep> sweep =
        trial.ok() ? store_->GetSweep(trial->sweep_id())
                   : absl::StatusOr<v1::Sweep>(trial.status());
    // A gang trial's member learns here too that its gang was torn down
    // (or never existed for this coordinator): its trial is re-run whole.
    const bool gang_gone = trial.ok() && GangWorld(trial->config()) > 0 &&
                           !gangs_.Runs(trial->trial_id(), request.worker_id());
    response.set_cancel_trial((sweep.ok() && sweep->state() == v1::ABORTED) ||
                              gang_gone);
  }
  return response;
}

bool Scheduler::WorkerHasBackend(const WorkerEntry& worker,
                                 const std::string& backend) {
  for (const v1::BackendProbe& probe : worker.probe.backends()) {
    if (probe.name() == backend) return probe.available();
  }
  return false;
}

std::string Scheduler::UnavailableReason(const std::string& backend) const {
  std::vector<std::string> reasons;
  for (const WorkerEntry& worker : registry_->AliveWorkers()) {
    if (WorkerHasBackend(worker, backend)) return "";
    std::string reason = "not registered by this worker";
    for (const v1::BackendProbe& probe : worker.probe.backends()) {
      if (probe.name() == backend) reason = probe.reason();
    }
    reasons.push_back(absl::StrCat(worker.name, ": ", reason));
  }
  return reasons.empty() ? "" : absl::StrJoin(reasons, "; ");
}

absl::StatusOr<v1::AcquireTrialResponse> Scheduler::Acquire(
    const std::string& worker_id, const std::string& token) {
  const std::optional<WorkerEntry> worker = registry_->Get(worker_id);
  if (!worker.has_value() || !registry_->Authenticate(worker_id, token)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker_id/token: '", worker_id,
        "' with this token is not a registration of this coordinator; "
        "register again"));
  }
  // A lapsed lease matters the moment someone asks for work; recording
  // trials nobody can run is the background tick's job (MarkUnavailable-
  // Trials), not every poll's.
  if (DueForExpiry()) RETURN_IF_ERROR(ExpireLeases());
  absl::MutexLock lock(&mu_);
  if (std::optional<std::pair<int64_t, v1::Gang>> grant =
          gangs_.TakeGrant(worker_id, clock_->NowUnixMs())) {
    return GangGrant(grant->first, grant->second);
  }
  // A worker a gang holds gets nothing else until its part is done.
  if (gangs_.Holds(worker_id)) return v1::AcquireTrialResponse();
  ASSIGN_OR_RETURN(v1::AcquireTrialResponse response, NextTrialFor(*worker));
  if (response.granted()) {
    idle_since_ms_.erase(worker_id);
  } else {
    idle_since_ms_.emplace(worker_id, clock_->NowUnixMs());
  }
  return response;
}

absl::StatusOr<v1::AcquireTrialResponse> Scheduler::NextTrialFor(
    const WorkerEntry& worker) {
  // Gang trials whose gang cannot form now are passed over, at most this
  // many a call (each costs a read): the trials behind them still run.
  constexpr int kMaxPassedOver = 16;
  std::vector<std::string> backends;
  for (const v1::BackendProbe& probe : worker.probe.backends()) {
    if (probe.available()) backends.push_back(probe.name());
  }
  int64_t after = 0;
  for (int passed = 0; passed <= kMaxPassedOver; ++passed) {
    ASSIGN_OR_RETURN(const std::optional<int64_t> next,
                     store_->FirstQueuedTrial(backends, after));
    if (!next.has_value()) break;
    ASSIGN_OR_RETURN(v1::Trial trial, store_->GetTrial(*next));
    const int world = GangWorld(trial.config());
    if (world == 0) return Grant(std::move(trial), worker.worker_id);
    const std::vector<std::string> members = PlaceFor(trial, worker, world);
    if (!members.empty()) {
      ASSIGN_OR_RETURN(v1::AcquireTrialResponse response,
                       FormGang(trial, members, worker.worker_id));
      if (response.granted()) return response;
      // Formed on another host: the asker looks further.
    }
    after = *next;
  }
  return v1::AcquireTrialResponse();
}

absl::StatusOr<v1::AcquireTrialResponse> Scheduler::Grant(
    v1::Trial trial, const std::string& worker_id) {
  const int64_t now = clock_->NowUnixMs();
  RETURN_IF_ERROR(store_->LeaseTrial(trial.trial_id(), worker_id, now));
  // What LeaseTrial wrote, without reading the trial back.
  trial.set_state(v1::LEASED);
  trial.set_attempt(trial.attempt() + 1);
  trial.set_worker_id(worker_id);
  trial.set_reason("");
  trial.set_updated_at_unix_ms(now);
  v1::AcquireTrialResponse response;
  *response.mutable_trial() = std::move(trial);
  response.set_granted(true);
  response.set_lease_deadline_unix_ms(now + options_.lease_ms);
  return response;
}

// Reads only the queued trials of backends no live worker has: a large
// sweep that the workers can run costs one DISTINCT query per tick.
absl::Status Scheduler::MarkUnavailableTrials() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(MarkUnavailableGangTrials());
  ASSIGN_OR_RETURN(const std::vector<std::string> backends,
                   store_->QueuedBackends());
  for (const std::string& backend : backends) {
    const std::string reason = UnavailableReason(backend);
    if (reason.empty()) continue;  // a live worker can run it, or none is up
    v1::TrialFilter filter;
    filter.set_state(v1::QUEUED);
    filter.set_moe_backend(backend);
    ASSIGN_OR_RETURN(const std::vector<v1::Trial> queued,
                     store_->QueryTrials(filter));
    const int64_t now = clock_->NowUnixMs();
    for (const v1::Trial& trial : queued) {
      const int64_t waiting_since =
          std::max(trial.updated_at_unix_ms(), started_ms_);
      if (now - waiting_since < unavailable_grace_ms_) continue;
      RETURN_IF_ERROR(EndWithoutResult(
          trial, v1::UNAVAILABLE,
          absl::StrCat(backend, " unavailable: ", reason), now));
    }
  }
  return absl::OkStatus();
}

bool Scheduler::HasLiveWorker(const std::string& name) const {
  for (const std::string& id : registry_->IdsNamed(name)) {
    if (registry_->IsAlive(id)) return true;
  }
  return false;
}

void Scheduler::NoMoreWorkersExpected() {
  absl::MutexLock lock(&mu_);
  unavailable_grace_ms_ = 0;
}

// Only the holder of the trial's current lease decides it: a report from
// anyone else, or of an attempt whose lease was lost, is refused (with why)
// and recorded nowhere; one already recorded is a duplicate.
absl::StatusOr<std::optional<v1::ReportResultResponse>> Scheduler::RefuseReport(
    const v1::Trial& trial, const v1::ReportResultRequest& request) {
  const int attempt = request.result().attempt();
  v1::ReportResultResponse response;
  if (trial.worker_id() != request.worker_id()) {
    response.set_reason(absl::StrCat("trial ", trial.trial_id(),
                                     " is leased to '", trial.worker_id(),
                                     "', not '", request.worker_id(), "'"));
    return response;
  }
  if (trial.state() == v1::LEASED && trial.attempt() == attempt) {
    return std::nullopt;
  }
  ASSIGN_OR_RETURN(const bool recorded,
                   store_->HasResult(trial.trial_id(), attempt));
  response.set_duplicate(recorded);
  if (!recorded) {
    response.set_reason(absl::StrCat("trial ", trial.trial_id(), " attempt ",
                                     attempt,
                                     " no longer holds a lease (the trial is ",
                                     v1::TrialState_Name(trial.state()),
                                     " at attempt ", trial.attempt(), ")"));
  }
  return response;
}

absl::StatusOr<v1::ReportResultResponse> Scheduler::Report(
    const v1::ReportResultRequest& request) {
  const v1::TrialResult& result = request.result();
  if (!tuner::IsFinal(result.outcome()) ||
      result.outcome() == v1::UNAVAILABLE) {
    return absl::InvalidArgumentError(
        absl::StrCat("result.outcome: ", v1::TrialState_Name(result.outcome()),
                     " is not allowed; allowed: DONE, FAILED, INCORRECT, "
                     "TIMEOUT, CANCELLED"));
  }
  if (!registry_->Authenticate(request.worker_id(), request.token())) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker_id/token: '", request.worker_id(),
        "' with this token is not a registration of this coordinator"));
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const v1::Trial trial, store_->GetTrial(result.trial_id()));
  if (GangWorld(trial.config()) > 0) return ReportGangRank(trial, request);
  ASSIGN_OR_RETURN(std::optional<v1::ReportResultResponse> refused,
                   RefuseReport(trial, request));
  if (refused.has_value()) return *refused;
  v1::TrialResult stored = result;
  stored.set_worker_id(request.worker_id());
  return RecordReported(trial, std::move(stored));
}

absl::Status Scheduler::EndWithoutResult(const v1::Trial& trial,
                                         v1::TrialState state,
                                         const std::string& reason,
                                         int64_t now_ms) {
  RETURN_IF_ERROR(store_->FinishTrial(trial.trial_id(), state, reason, now_ms));
  LogTrialOutcome(trial, state, nullptr, reason);
  RETURN_IF_ERROR(AdvanceSweep(trial.sweep_id()));
  Notify();
  return absl::OkStatus();
}

absl::StatusOr<v1::ReportResultResponse> Scheduler::RecordReported(
    const v1::Trial& trial, v1::TrialResult stored) {
  RefloorAt(bandwidths_.Best(stored.fingerprint()), &stored);
  ASSIGN_OR_RETURN(const bool recorded,
                   store_->RecordResult(stored, clock_->NowUnixMs()));
  v1::ReportResultResponse response;
  response.set_accepted(recorded);
  response.set_duplicate(!recorded);
  if (recorded) {
    LogTrialOutcome(trial, stored.outcome(), &stored, stored.reason());
    if (result_observer_) {
      const std::optional<WorkerEntry> worker =
          registry_->Get(stored.worker_id());
      result_observer_(worker ? worker->name : stored.worker_id(), stored);
    }
    RETURN_IF_ERROR(AdvanceSweep(trial.sweep_id()));
    Notify();
  }
  return response;
}

void Scheduler::SetResultObserver(ResultObserver observer) {
  absl::MutexLock lock(&mu_);
  result_observer_ = std::move(observer);
}

absl::StatusOr<v1::Sweep> Scheduler::Cancel(int64_t sweep_id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(store_->CancelSweep(sweep_id, clock_->NowUnixMs()));
  plans_.erase(sweep_id);
  Notify();
  return store_->GetSweep(sweep_id);
}

std::string Scheduler::LostLeaseReason(const v1::Trial& trial) const {
  if (!registry_->IsAlive(trial.worker_id())) {
    return absl::StrCat("worker ", trial.worker_id(), " went silent");
  }
  // A heartbeat heard well after the lease was granted that names another
  // trial (or none): the worker gave up delivering this one's result.
  const std::optional<WorkerEntry> worker = registry_->Get(trial.worker_id());
  const int64_t grace = 2 * int64_t{options_.heartbeat_interval_ms} + 500;
  if (worker.has_value() && worker->last_heard_ms > 0 &&
      worker->current_trial_id != trial.trial_id() &&
      worker->last_heard_ms >= trial.updated_at_unix_ms() + grace) {
    return absl::StrCat("worker ", trial.worker_id(),
                        " no longer runs it and its result never arrived");
  }
  return "";
}

absl::Status Scheduler::LoseLease(const v1::Trial& trial,
                                  const std::string& why) {
  ASSIGN_OR_RETURN(const v1::Sweep sweep, store_->GetSweep(trial.sweep_id()));
  // A cancelled sweep runs nothing more: re-queued, the trial would be
  // leased to another worker only to be stopped at its first heartbeat.
  // It ends as its worker's report would have ended it.
  if (sweep.state() == v1::ABORTED) {
    return EndWithoutResult(trial, v1::CANCELLED,
                            absl::StrCat("sweep cancelled; ", why),
                            clock_->NowUnixMs());
  }
  const int max_attempts = trial.measurement().max_attempts() > 0
                               ? trial.measurement().max_attempts()
                               : 3;
  if (trial.attempt() < max_attempts) {
    RETURN_IF_ERROR(
        store_->RequeueTrial(trial.trial_id(), why, clock_->NowUnixMs()));
    LogWarning("trial ", trial.trial_id(), " re-queued: ", why);
    return absl::OkStatus();
  }
  return EndWithoutResult(
      trial, v1::FAILED,
      absl::StrCat(why, "; lost ", trial.attempt(), " times"),
      clock_->NowUnixMs());
}

absl::Status Scheduler::ReleaseLeasesOf(const std::string& worker_id,
                                        const std::string& why) {
  ASSIGN_OR_RETURN(std::vector<v1::Trial> leased,
                   store_->TrialsInStates({v1::LEASED}));
  idle_since_ms_.erase(worker_id);
  for (const v1::Trial& trial : leased) {
    if (GangWorld(trial.config()) > 0) {
      RETURN_IF_ERROR(ReleaseGangOf(trial, worker_id, why));
    } else if (trial.worker_id() == worker_id) {
      RETURN_IF_ERROR(LoseLease(trial, why));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::ReleaseStoppedWorker(const std::string& name,
                                             const std::string& why) {
  absl::MutexLock lock(&mu_);
  for (const std::string& worker_id : registry_->IdsNamed(name)) {
    RETURN_IF_ERROR(ReleaseLeasesOf(worker_id, why));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<v1::Trial> leased,
                   store_->TrialsInStates({v1::LEASED}));
  for (const v1::Trial& trial : leased) {
    // A gang is one unit: any member lost loses the whole trial.
    if (GangWorld(trial.config()) > 0) {
      const std::string why = GangLostReason(trial);
      if (!why.empty()) RETURN_IF_ERROR(LoseGang(trial, why));
      continue;
    }
    const std::string why = LostLeaseReason(trial);
    if (!why.empty()) RETURN_IF_ERROR(LoseLease(trial, why));
  }
  // A rank that asks after its gang ended is told why for a while longer.
  gangs_.Prune(clock_->NowUnixMs(), 10 * options_.lease_ms);
  // A silent worker is not idle; it is again when it next asks.
  for (auto it = idle_since_ms_.begin(); it != idle_since_ms_.end();) {
    it = registry_->IsAlive(it->first) ? std::next(it)
                                       : idle_since_ms_.erase(it);
  }
  return absl::OkStatus();
}

// Called whenever a trial of the sweep reached a final state (and on a
// restart): the strategy may propose more (the next rung of successive
// halving, TPE's next point, a confirmation round). When it proposes nothing
// and nothing is queued or leased, the sweep is finished and its winners
// become the incumbents later sweeps must beat beyond the noise.
absl::Status Scheduler::AdvanceSweep(int64_t sweep_id) {
  ASSIGN_OR_RETURN(const v1::Sweep sweep, store_->GetSweep(sweep_id));
  if (sweep.state() != v1::RUNNING) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::unique_ptr<tuner::Strategy> strategy,
                   tuner::MakeStrategy(sweep.spec().strategy()));
  const tuner::SweepPlan& plan = PlanOf(sweep);
  // A strategy whose first batch was everything needs the history once, at
  // the end (for the winners), not on every result: that keeps a sweep of
  // 10^4..10^5 trials linear.
  if (strategy->ProposesAllAtOnce(plan) && OpenTrials(sweep) > 0) {
    return absl::OkStatus();
  }
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> history,
                   store_->QueryTrials(filter));
  std::vector<v1::Trial> proposed = strategy->Propose(plan, history);
  if (!proposed.empty()) {
    LogInfo("sweep ", sweep_id, ": ", std::string(strategy->name()),
            " proposes ", proposed.size(), " more trials");
    return store_->AddTrials(sweep_id, &proposed, clock_->NowUnixMs());
  }
  for (const v1::Trial& trial : history) {
    if (!tuner::IsFinal(trial.state())) return absl::OkStatus();
  }
  RETURN_IF_ERROR(AcceptWinners(sweep_id, history));
  plans_.erase(sweep_id);
  LogInfo("sweep ", sweep_id, " finished");
  return store_->SetSweepState(sweep_id, v1::FINISHED, clock_->NowUnixMs());
}

absl::Status Scheduler::AcceptWinners(int64_t sweep_id,
                                      const std::vector<v1::Trial>& trials) {
  std::set<std::string> workloads;
  for (const v1::Trial& trial : trials) workloads.insert(trial.workload_hash());
  for (const std::string& hash : workloads) {
    std::vector<v1::Trial> of_workload;
    for (const v1::Trial& trial : trials) {
      if (trial.workload_hash() == hash) of_workload.push_back(trial);
    }
    ASSIGN_OR_RETURN(const std::vector<v1::Trial> incumbents,
                     store_->Incumbents(hash, sweep_id));
    const v1::GetBestResponse best = tuner::SelectBest(of_workload, incumbents);
    for (const v1::BestForWorkload& winner : best.workloads()) {
      RETURN_IF_ERROR(store_->SetIncumbent(hash, winner.fingerprint().hash(),
                                           winner.best().trial_id(),
                                           clock_->NowUnixMs()));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::ResumeSweeps() {
  ASSIGN_OR_RETURN(const std::vector<v1::Sweep> sweeps, store_->ListSweeps(0));
  absl::MutexLock lock(&mu_);
  for (const v1::Sweep& sweep : sweeps) {
    // A database may hold queued trials in a cancelled sweep (a lease lost
    // after the cancel, re-queued): closed here, never handed to a worker.
    if (sweep.state() == v1::ABORTED) {
      RETURN_IF_ERROR(
          store_->CancelSweep(sweep.sweep_id(), clock_->NowUnixMs()));
    }
    if (sweep.state() != v1::RUNNING) continue;
    LogInfo("resuming sweep ", sweep.sweep_id());
    RETURN_IF_ERROR(AdvanceSweep(sweep.sweep_id()));
  }
  Notify();
  return absl::OkStatus();
}

void Scheduler::Notify() {
  absl::MutexLock lock(&event_mu_);
  ++event_version_;
}

int64_t Scheduler::event_version() const {
  absl::MutexLock lock(&event_mu_);
  return event_version_;
}

int64_t Scheduler::WaitForEvent(int64_t seen, int64_t timeout_ms) const {
  absl::MutexLock lock(&event_mu_);
  const auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(event_mu_) {
    return event_version_ > seen;
  };
  event_mu_.AwaitWithTimeout(absl::Condition(&changed),
                             absl::Milliseconds(timeout_ms));
  return event_version_;
}

}  // namespace moetune::coordinator
