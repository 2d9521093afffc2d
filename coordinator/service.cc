#include "coordinator/service.h"

#include <set>
#include <utility>

#include "coordinator/queries.h"
#include "tuner/search.h"

namespace moetune::coordinator {
namespace {

template <typename T>
grpc::Status Answer(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return ToGrpc(result.status());
  *out = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status MoetuneService::SubmitSweep(grpc::ServerContext*,
                                         const v1::SubmitSweepRequest* request,
                                         v1::SubmitSweepResponse* response) {
  return Answer(scheduler_->Submit(request->spec()), response);
}

grpc::Status MoetuneService::GetSweep(grpc::ServerContext*,
                                      const v1::GetSweepRequest* request,
                                      v1::Sweep* response) {
  return Answer(store_->GetSweep(request->sweep_id()), response);
}

grpc::Status MoetuneService::ListSweeps(grpc::ServerContext*,
                                        const v1::ListSweepsRequest* request,
                                        v1::ListSweepsResponse* response) {
  absl::StatusOr<std::vector<v1::Sweep>> sweeps =
      store_->ListSweeps(request->limit());
  if (!sweeps.ok()) return ToGrpc(sweeps.status());
  for (v1::Sweep& sweep : *sweeps) *response->add_sweeps() = std::move(sweep);
  return grpc::Status::OK;
}

grpc::Status MoetuneService::CancelSweep(grpc::ServerContext*,
                                         const v1::CancelSweepRequest* request,
                                         v1::Sweep* response) {
  return Answer(scheduler_->Cancel(request->sweep_id()), response);
}

// Sends the sweep's progress, then every trial as it reaches a final state,
// until the sweep is no longer running (or the client goes away).
grpc::Status MoetuneService::WatchSweep(
    grpc::ServerContext* context, const v1::WatchSweepRequest* request,
    grpc::ServerWriter<v1::SweepEvent>* writer) {
  std::set<int64_t> sent;
  int64_t version = scheduler_->event_version();
  v1::TrialFilter filter;
  filter.set_sweep_id(request->sweep_id());
  bool first = true;
  while (!context->IsCancelled()) {
    absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(request->sweep_id());
    if (!sweep.ok()) return ToGrpc(sweep.status());
    absl::StatusOr<std::vector<v1::Trial>> trials = store_->QueryTrials(filter);
    if (!trials.ok()) return ToGrpc(trials.status());
    v1::SweepEvent event;
    *event.mutable_progress() = *sweep;
    if (first && !writer->Write(event)) return grpc::Status::OK;
    first = false;
    for (const v1::Trial& trial : *trials) {
      if (!tuner::IsFinal(trial.state()) ||
          !sent.insert(trial.trial_id()).second) {
        continue;
      }
      *event.mutable_trial() = trial;
      if (!writer->Write(event)) return grpc::Status::OK;
    }
    if (sweep->state() != v1::RUNNING) {
      // The last word: the final counts and state, with no trial attached.
      v1::SweepEvent last;
      *last.mutable_progress() = *sweep;
      writer->Write(last);
      return grpc::Status::OK;
    }
    version = scheduler_->WaitForEvent(version, 1000);
  }
  return grpc::Status::OK;
}

grpc::Status MoetuneService::QueryTrials(grpc::ServerContext*,
                                         const v1::TrialFilter* request,
                                         v1::QueryTrialsResponse* response) {
  absl::StatusOr<std::vector<v1::Trial>> trials = store_->QueryTrials(*request);
  if (!trials.ok()) return ToGrpc(trials.status());
  for (v1::Trial& trial : *trials) *response->add_trials() = std::move(trial);
  return grpc::Status::OK;
}

grpc::Status MoetuneService::GetBest(grpc::ServerContext*,
                                     const v1::GetBestRequest* request,
                                     v1::GetBestResponse* response) {
  return Answer(AnswerGetBest(*store_, *request), response);
}

grpc::Status MoetuneService::ListWorkers(grpc::ServerContext*,
                                         const v1::ListWorkersRequest*,
                                         v1::ListWorkersResponse* response) {
  // Every heartbeat is stored, so the stored view already says who is alive
  // and which trial each worker holds.
  return Answer(
      AnswerListWorkers(*store_, clock_->NowUnixMs(), registry_->lease_ms()),
      response);
}

grpc::Status WorkerControlService::RegisterWorker(
    grpc::ServerContext*, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  return Answer(scheduler_->RegisterWorker(*request), response);
}

grpc::Status WorkerControlService::Heartbeat(
    grpc::ServerContext*, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  *response = scheduler_->Heartbeat(*request);
  return grpc::Status::OK;
}

grpc::Status WorkerControlService::AcquireTrial(
    grpc::ServerContext*, const v1::AcquireTrialRequest* request,
    v1::AcquireTrialResponse* response) {
  return Answer(scheduler_->Acquire(request->worker_id()), response);
}

grpc::Status WorkerControlService::ReportResult(
    grpc::ServerContext*, const v1::ReportResultRequest* request,
    v1::ReportResultResponse* response) {
  return Answer(scheduler_->Report(*request), response);
}

}  // namespace moetune::coordinator
