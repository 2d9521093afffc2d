// GrpcGangRendezvous: a GangRendezvous through the coordinator's
// WorkerControl.Rendezvous, as a gang trial's process calls it: with its
// worker's id and registration token and the gang id from its
// TrialExecution, over a channel made like the worker's own (TLS flags,
// bearer token). Each call blocks at most 10 s at the coordinator; this
// loops until every rank posted, the gang is torn down, or the deadline.
// Transient transport errors (the coordinator restarting) are retried until
// the deadline. One object per trial process; not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/moetune.grpc.pb.h"
#include "worker/gang_rendezvous.h"

namespace moetune::worker {

class GrpcGangRendezvous final : public GangRendezvous {
 public:
  // `execution` carries the gang, worker id and token.
  GrpcGangRendezvous(std::shared_ptr<grpc::Channel> channel,
                     const v1::TrialExecution& execution);
  absl::StatusOr<std::vector<std::string>> AllGather(
      const std::string& key, const std::string& payload,
      absl::Time deadline) override;

 private:
  std::unique_ptr<v1::WorkerControl::Stub> stub_;
  v1::RendezvousRequest base_;  // who asks, for which gang and rank
};

}  // namespace moetune::worker
