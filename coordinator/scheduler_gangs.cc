// The Scheduler's gang half (scheduler.h): forming gangs, their grants,
// their loss and teardown, the reports of their ranks, the rendezvous, and
// the MEASURED trials no host can serve.
//
// Decisions:
// - Reports: a gang trial is decided by its ranks together. Each rank
//   reports; a DONE report is held until every rank has reported DONE, and
//   then rank 0's result is recorded (its worker, world_size = W). The first
//   report that is not DONE (FAILED, INCORRECT, TIMEOUT, CANCELLED) is the
//   trial's outcome at once, its reason "rank r (worker id): reason", and
//   the gang is torn down (the other ranks are cancelled through their
//   heartbeats). So a rank 0 DONE followed by a rank 1 INCORRECT is
//   INCORRECT: a step whose rank 1 was wrong was wrong. Such an outcome is
//   a result, not a lost lease: it is not re-queued.
// - Loss: a member silent past the lease, one that did not pick up its
//   grant within the lease, one whose heartbeats say it no longer runs the
//   trial, or one that registered again, tears the gang down; every other
//   member's heartbeat then says cancel_trial, and the trial is re-queued
//   whole (attempt + 1 at its next lease), or FAILED past max_attempts with
//   the rank and worker in the reason (CANCELLED, with them, when its sweep
//   was cancelled).
// - Restart: gangs live in memory only. A restarted coordinator re-queues
//   every LEASED gang trial whole at its first lease check (its members are
//   cancelled by their heartbeats, their reports refused, their rendezvous
//   refused as an unknown gang): a gang cannot be re-formed around ranks
//   whose rendezvous state is gone.
#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/scheduler.h"
#include "coordinator/trial_log.h"
#include "kernels/backends/registry.h"
#include "tuner/config_key.h"

namespace moetune::coordinator {
namespace {

bool IsGpuBackend(const std::string& name) {
  const backends::BackendDescriptor* backend = backends::FindBackend(name);
  return backend != nullptr && backend->is_gpu();
}

std::string Who(int rank, const std::string& worker_id) {
  return absl::StrCat("rank ", rank, " (worker ", worker_id, ")");
}

bool PlanHasGangs(const tuner::SweepPlan& plan) {
  for (int i = 0; i < plan.workload_count(); ++i) {
    for (const v1::TrialConfig& config : plan.configs(i)) {
      if (GangWorld(config) > 0) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<GangCandidate> Scheduler::Candidates(
    const std::string& backend) const {
  std::vector<GangCandidate> candidates;
  for (const WorkerEntry& worker : registry_->AliveWorkers()) {
    GangCandidate c = CandidateOf(worker.worker_id, worker.probe, backend);
    auto idle = idle_since_ms_.find(worker.worker_id);
    c.idle = idle != idle_since_ms_.end() && !gangs_.Holds(worker.worker_id);
    c.idle_since_ms = idle == idle_since_ms_.end() ? 0 : idle->second;
    candidates.push_back(std::move(c));
  }
  return candidates;
}

std::vector<std::string> Scheduler::PlaceFor(const v1::Trial& trial,
                                             const WorkerEntry& worker,
                                             int world) {
  const std::string& backend = trial.config().moe_backend();
  if (!IsGpuBackend(backend)) return {};
  return PlaceGang(CandidateOf(worker.worker_id, worker.probe, backend),
                   Candidates(backend), world);
}

absl::StatusOr<v1::AcquireTrialResponse> Scheduler::FormGang(
    const v1::Trial& trial, const std::vector<std::string>& members,
    const std::string& asker) {
  ASSIGN_OR_RETURN(v1::AcquireTrialResponse response, Grant(trial, members[0]));
  const int attempt = response.trial().attempt();
  *response.mutable_gang() = gangs_.Form(trial.trial_id(), attempt, members,
                                         asker, clock_->NowUnixMs());
  for (const std::string& member : members) idle_since_ms_.erase(member);
  LogInfo("trial ", trial.trial_id(), " attempt ", attempt, ": gang ",
          response.gang().gang_id(), " of ", members.size(), " workers");
  if (members[0] != asker) return v1::AcquireTrialResponse();
  return response;
}

absl::StatusOr<v1::AcquireTrialResponse> Scheduler::GangGrant(
    int64_t trial_id, const v1::Gang& gang) {
  v1::AcquireTrialResponse response;
  ASSIGN_OR_RETURN(*response.mutable_trial(), store_->GetTrial(trial_id));
  *response.mutable_gang() = gang;
  response.set_granted(true);
  response.set_lease_deadline_unix_ms(clock_->NowUnixMs() + options_.lease_ms);
  return response;
}

std::string Scheduler::GangLostReason(const v1::Trial& trial) const {
  const std::optional<GangView> gang = gangs_.OfTrial(trial.trial_id());
  if (!gang.has_value() || gang->attempt != trial.attempt()) {
    return "its gang was formed before the coordinator restarted (a gang "
           "trial is re-run whole)";
  }
  const int64_t now = clock_->NowUnixMs();
  const int64_t grace = 2 * int64_t{options_.heartbeat_interval_ms} + 500;
  for (size_t r = 0; r < gang->worker_ids.size(); ++r) {
    if (gang->done[r]) continue;
    const std::string& id = gang->worker_ids[r];
    const std::string who = Who(static_cast<int>(r), id);
    if (!registry_->IsAlive(id)) return absl::StrCat(who, " went silent");
    if (!gang->picked_up[r]) {
      if (now - gang->formed_ms <= options_.lease_ms) continue;
      return absl::StrCat(who, " did not pick up its grant within the lease");
    }
    const std::optional<WorkerEntry> worker = registry_->Get(id);
    if (worker.has_value() && worker->current_trial_id != trial.trial_id() &&
        worker->last_heard_ms >= gang->picked_up_ms[r] + grace) {
      return absl::StrCat(who, " no longer runs it");
    }
  }
  return "";
}

absl::Status Scheduler::LoseGang(const v1::Trial& trial,
                                 const std::string& why) {
  gangs_.End(trial.trial_id(), absl::StrCat("the gang was torn down: ", why),
             clock_->NowUnixMs());
  return LoseLease(trial, why);
}

absl::Status Scheduler::ReleaseGangOf(const v1::Trial& trial,
                                      const std::string& worker_id,
                                      const std::string& why) {
  const std::optional<GangView> gang = gangs_.OfTrial(trial.trial_id());
  const int rank = gang.has_value() ? gang->RankOf(worker_id) : -1;
  if (rank < 0 || gang->done[rank]) return absl::OkStatus();
  return LoseGang(trial, absl::StrCat(Who(rank, worker_id), ": ", why));
}

absl::StatusOr<v1::ReportResultResponse> Scheduler::ReportGangRank(
    const v1::Trial& trial, const v1::ReportResultRequest& request) {
  const v1::TrialResult& result = request.result();
  const std::optional<GangView> gang = gangs_.OfTrial(trial.trial_id());
  const int rank = gang.has_value() ? gang->RankOf(request.worker_id()) : -1;
  v1::ReportResultResponse response;
  if (rank < 0 || gang->attempt != result.attempt() ||
      trial.state() != v1::LEASED || trial.attempt() != result.attempt()) {
    ASSIGN_OR_RETURN(const bool recorded,
                     store_->HasResult(trial.trial_id(), result.attempt()));
    response.set_duplicate(recorded);
    if (!recorded) {
      response.set_reason(absl::StrCat(
          "trial ", trial.trial_id(), " attempt ", result.attempt(),
          ": worker '", request.worker_id(),
          "' is in no live gang of it (torn down or decided; the trial is ",
          v1::TrialState_Name(trial.state()), " at attempt ", trial.attempt(),
          ")"));
    }
    return response;
  }
  if (result.outcome() != v1::DONE) {
    v1::TrialResult stored = result;
    stored.set_worker_id(request.worker_id());
    stored.set_reason(
        absl::StrCat(Who(rank, request.worker_id()), ": ", result.reason()));
    return RecordGangOutcome(
        trial, stored,
        absl::StrCat(Who(rank, request.worker_id()), " reported ",
                     v1::TrialState_Name(result.outcome()), ": ",
                     result.reason()));
  }
  if (!gangs_.NoteDone(trial.trial_id(), rank, result)) {
    response.set_accepted(true);  // held until every rank reported DONE
    return response;
  }
  v1::TrialResult stored = *gangs_.RankZeroResult(trial.trial_id());
  stored.set_worker_id(gang->worker_ids[0]);
  return RecordGangOutcome(trial, stored, "the trial is decided");
}

absl::StatusOr<v1::ReportResultResponse> Scheduler::RecordGangOutcome(
    const v1::Trial& trial, v1::TrialResult stored,
    const std::string& end_reason) {
  stored.set_world_size(GangWorld(trial.config()));
  absl::StatusOr<v1::ReportResultResponse> response =
      RecordReported(trial, std::move(stored));
  gangs_.End(trial.trial_id(), end_reason, clock_->NowUnixMs());
  return response;
}

absl::StatusOr<v1::RendezvousResponse> Scheduler::Rendezvous(
    const v1::RendezvousRequest& request) {
  if (!registry_->Authenticate(request.worker_id(), request.token())) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker_id/token: '", request.worker_id(),
        "' with this token is not a registration of this coordinator"));
  }
  return gangs_.Rendezvous(request);
}

// Only sweeps whose plan has MEASURED configs are read, so sweeps without
// them cost nothing here.
absl::Status Scheduler::MarkUnavailableGangTrials() {
  std::vector<int64_t> sweeps;
  for (const auto& [sweep_id, plan] : plans_) {
    auto [memo, fresh] = has_gangs_.emplace(sweep_id, false);
    if (fresh) memo->second = PlanHasGangs(*plan);
    if (memo->second) sweeps.push_back(sweep_id);
  }
  for (int64_t sweep_id : sweeps) RETURN_IF_ERROR(MarkGangTrialsOf(sweep_id));
  return absl::OkStatus();
}

absl::Status Scheduler::MarkGangTrialsOf(int64_t sweep_id) {
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  filter.set_state(v1::QUEUED);
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> queued,
                   store_->QueryTrials(filter));
  const int64_t now = clock_->NowUnixMs();
  std::map<std::pair<std::string, int>, std::string> shortfalls;  // memo
  for (const v1::Trial& trial : queued) {
    const int world = GangWorld(trial.config());
    const int64_t waiting_since =
        std::max(trial.updated_at_unix_ms(), started_ms_);
    if (world == 0 || now - waiting_since < unavailable_grace_ms_) {
      continue;
    }
    const std::string& backend = trial.config().moe_backend();
    auto [memo, fresh] = shortfalls.try_emplace({backend, world});
    if (fresh) {
      memo->second = GangShortfall(
          Candidates(backend), backend,
          GangBackendRefusal(backend, backends::FindBackend(backend)), world);
    }
    const std::string& reason = memo->second;
    if (reason.empty()) continue;
    RETURN_IF_ERROR(EndWithoutResult(
        trial, v1::UNAVAILABLE,
        absl::StrCat("MEASURED tp", trial.config().tp(), " x ep",
                     trial.config().ep(), " unavailable: ", reason),
        now));
  }
  return absl::OkStatus();
}

}  // namespace moetune::coordinator
