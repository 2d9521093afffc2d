#include "coordinator/service.h"

#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "coordinator/queries.h"

namespace moetune::coordinator {
namespace {

// How far back (ms) each WatchSweep round reads beyond the last one.
constexpr int64_t kWatchMarginMs = 10000;
// Rounds of one watch are at least this far apart (ms): under a stream of
// results a watcher reads once per round, not once per result.
constexpr int64_t kWatchRoundMs = 250;

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

absl::Status MoetuneService::CheckWritable() const {
  if (read_only_db_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(read_only_db_,
                   ": opened read-only by this command; submit and cancel "
                   "through the coordinator that writes it (--coordinator)"));
}

grpc::Status MoetuneService::SubmitSweep(grpc::ServerContext* context,
                                         const v1::SubmitSweepRequest* request,
                                         v1::SubmitSweepResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWrite);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    return ToGrpc(writable);
  }
  return Answer(scheduler_->Submit(request->spec(), request->request_id()),
                response);
}

grpc::Status MoetuneService::GetSweep(grpc::ServerContext* context,
                                      const v1::GetSweepRequest* request,
                                      v1::Sweep* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(store_->GetSweep(request->sweep_id()), response);
}

grpc::Status MoetuneService::ListSweeps(grpc::ServerContext* context,
                                        const v1::ListSweepsRequest* request,
                                        v1::ListSweepsResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  absl::StatusOr<db::SweepPage> page = store_->ListSweepPage(
      request->limit(), request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpc(page.status());
  for (v1::Sweep& sweep : page->sweeps) {
    *response->add_sweeps() = std::move(sweep);
  }
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status MoetuneService::CancelSweep(grpc::ServerContext* context,
                                         const v1::CancelSweepRequest* request,
                                         v1::Sweep* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWrite);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    return ToGrpc(writable);
  }
  return Answer(scheduler_->Cancel(request->sweep_id()), response);
}

// Sends the sweep's progress, then every trial as it reaches a final state
// (without raw samples), until the sweep is no longer running (or the client
// goes away). Each round reads only the trials updated since the last one.
// A round whose counts moved without a trial ending (a trial leased, or
// re-queued) sends the progress alone, so that a watcher's "running" counts
// the trials leased since.
grpc::Status MoetuneService::WatchSweep(
    grpc::ServerContext* context, const v1::WatchSweepRequest* request,
    grpc::ServerWriter<v1::SweepEvent>* writer) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  std::set<int64_t> sent;
  int64_t version = scheduler_->event_version();
  int64_t since_ms = 0;
  bool first = true;
  std::map<std::string, int32_t> counts;  // as last sent
  while (!context->IsCancelled()) {
    if (stopping_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the coordinator is shutting down; watch again");
    }
    absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(request->sweep_id());
    if (!sweep.ok()) return ToGrpc(sweep.status());
    const int64_t round_ms = clock_->NowUnixMs();
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store_->FinalTrialsSince(request->sweep_id(), since_ms);
    if (!trials.ok()) return ToGrpc(trials.status());
    // A write stamped before round_ms may commit after this read: the next
    // round reads back a margin, and `sent` keeps a trial from going out
    // twice.
    since_ms = round_ms - kWatchMarginMs;
    v1::SweepEvent event;
    *event.mutable_progress() = *sweep;
    const std::map<std::string, int32_t> now_counts(
        sweep->trial_counts().begin(), sweep->trial_counts().end());
    if ((first || now_counts != counts) && !writer->Write(event)) {
      return grpc::Status::OK;
    }
    first = false;
    counts = now_counts;
    for (const v1::Trial& trial : *trials) {
      if (!sent.insert(trial.trial_id()).second) continue;
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
    const int64_t wait_ms = round_ms + kWatchRoundMs - clock_->NowUnixMs();
    if (wait_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
  }
  return grpc::Status::OK;
}

void MoetuneService::Stop() {
  stopping_ = true;
  scheduler_->WakeWaiters();
}

grpc::Status MoetuneService::QueryTrials(grpc::ServerContext* context,
                                         const v1::TrialFilter* request,
                                         v1::QueryTrialsResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  absl::StatusOr<db::TrialPage> page = store_->QueryTrialPage(*request);
  if (!page.ok()) return ToGrpc(page.status());
  for (v1::Trial& trial : page->trials) {
    *response->add_trials() = std::move(trial);
  }
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status MoetuneService::GetBest(grpc::ServerContext* context,
                                     const v1::GetBestRequest* request,
                                     v1::GetBestResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(AnswerGetBest(*store_, *request), response);
}

grpc::Status MoetuneService::ListWorkers(grpc::ServerContext* context,
                                         const v1::ListWorkersRequest*,
                                         v1::ListWorkersResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kRead);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  // Every heartbeat is stored, so the stored view already says who is alive
  // and which trial each worker holds.
  return Answer(
      AnswerListWorkers(*store_, clock_->NowUnixMs(), registry_->lease_ms()),
      response);
}

grpc::Status WorkerControlService::RegisterWorker(
    grpc::ServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWorker);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(scheduler_->RegisterWorker(*request), response);
}

grpc::Status WorkerControlService::Heartbeat(
    grpc::ServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWorker);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(scheduler_->Heartbeat(*request), response);
}

grpc::Status WorkerControlService::AcquireTrial(
    grpc::ServerContext* context, const v1::AcquireTrialRequest* request,
    v1::AcquireTrialResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWorker);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(scheduler_->Acquire(request->worker_id(), request->token()),
                response);
}

grpc::Status WorkerControlService::ReportResult(
    grpc::ServerContext* context, const v1::ReportResultRequest* request,
    v1::ReportResultResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWorker);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(scheduler_->Report(*request), response);
}

grpc::Status WorkerControlService::Rendezvous(
    grpc::ServerContext* context, const v1::RendezvousRequest* request,
    v1::RendezvousResponse* response) {
  if (absl::Status allowed = auth_->Check(*context, Role::kWorker);
      !allowed.ok()) {
    return ToGrpc(allowed);
  }
  return Answer(scheduler_->Rendezvous(*request), response);
}

}  // namespace moetune::coordinator
