// The gRPC services: thin and final. Each method checks the caller's role
// (auth.h), translates the request into a Scheduler / Store call and an
// absl::Status into a grpc::Status; the logic lives in Scheduler and
// queries. Thread-safe as those are.
#pragma once

#include <atomic>
#include <string>

#include "coordinator/auth.h"
#include "coordinator/registry.h"
#include "coordinator/scheduler.h"
#include "db/store.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::coordinator {

grpc::Status ToGrpc(const absl::Status& status);

class MoetuneService final : public v1::Moetune::Service {
 public:
  MoetuneService(db::Store* store, Scheduler* scheduler,
                 WorkerRegistry* registry, const Clock* clock,
                 const Authorizer* auth, std::string read_only_db = "")
      : store_(store),
        scheduler_(scheduler),
        registry_(registry),
        clock_(clock),
        auth_(auth),
        read_only_db_(std::move(read_only_db)) {}

  grpc::Status SubmitSweep(grpc::ServerContext*, const v1::SubmitSweepRequest*,
                           v1::SubmitSweepResponse*) override;
  grpc::Status GetSweep(grpc::ServerContext*, const v1::GetSweepRequest*,
                        v1::Sweep*) override;
  grpc::Status ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest*,
                          v1::ListSweepsResponse*) override;
  grpc::Status CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest*,
                           v1::Sweep*) override;
  grpc::Status WatchSweep(grpc::ServerContext*, const v1::WatchSweepRequest*,
                          grpc::ServerWriter<v1::SweepEvent>*) override;
  grpc::Status QueryTrials(grpc::ServerContext*, const v1::TrialFilter*,
                           v1::QueryTrialsResponse*) override;
  grpc::Status GetBest(grpc::ServerContext*, const v1::GetBestRequest*,
                       v1::GetBestResponse*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                           v1::ListWorkersResponse*) override;

  // Ends the open watches at once (UNAVAILABLE): the server is stopping and
  // should not wait out their rounds.
  void Stop();

 private:
  db::Store* store_;
  Scheduler* scheduler_;
  WorkerRegistry* registry_;
  const Clock* clock_;
  const Authorizer* auth_;
  // Non-empty: the database this service only reads; writes are refused.
  const std::string read_only_db_;
  std::atomic<bool> stopping_{false};

  absl::Status CheckWritable() const;
};

class WorkerControlService final : public v1::WorkerControl::Service {
 public:
  WorkerControlService(Scheduler* scheduler, const Authorizer* auth)
      : scheduler_(scheduler), auth_(auth) {}

  grpc::Status RegisterWorker(grpc::ServerContext*,
                              const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override;
  grpc::Status AcquireTrial(grpc::ServerContext*,
                            const v1::AcquireTrialRequest*,
                            v1::AcquireTrialResponse*) override;
  grpc::Status ReportResult(grpc::ServerContext*,
                            const v1::ReportResultRequest*,
                            v1::ReportResultResponse*) override;
  // Blocks up to the request's wait_ms (at most 10 s) on one of the sync
  // server's threads: a gang has at most 8 ranks, and each rendezvous
  // ends as soon as the last rank posts.
  grpc::Status Rendezvous(grpc::ServerContext*, const v1::RendezvousRequest*,
                          v1::RendezvousResponse*) override;

 private:
  Scheduler* scheduler_;
  const Authorizer* auth_;
};

}  // namespace moetune::coordinator
