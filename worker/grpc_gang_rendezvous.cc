#include "worker/grpc_gang_rendezvous.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace moetune::worker {
namespace {

// What the coordinator blocks at most per call (coordinator/gangs.h).
constexpr absl::Duration kMaxWait = absl::Seconds(10);
// Beyond the wait, for the call itself.
constexpr absl::Duration kCallSlack = absl::Seconds(5);

bool Transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& key) {
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("rendezvous '", key, "': ", status.error_message()));
}

}  // namespace

GrpcGangRendezvous::GrpcGangRendezvous(std::shared_ptr<grpc::Channel> channel,
                                       const v1::TrialExecution& execution)
    : stub_(v1::WorkerControl::NewStub(channel)) {
  base_.set_worker_id(execution.worker_id());
  base_.set_token(execution.token());
  base_.set_gang_id(execution.gang().gang_id());
  base_.set_rank(execution.gang().rank());
}

absl::StatusOr<std::vector<std::string>> GrpcGangRendezvous::AllGather(
    const std::string& key, const std::string& payload, absl::Time deadline) {
  v1::RendezvousRequest request = base_;
  request.set_key(key);
  request.set_payload(payload);
  grpc::Status last;
  while (absl::Now() < deadline) {
    const absl::Duration wait = std::min(kMaxWait, deadline - absl::Now());
    request.set_wait_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(wait)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + wait + kCallSlack));
    v1::RendezvousResponse response;
    last = stub_->Rendezvous(&context, request, &response);
    if (!last.ok()) {
      if (!Transient(last)) return FromGrpc(last, key);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (response.torn_down()) {
      return absl::AbortedError(
          absl::StrCat("rendezvous '", key,
                       "': the gang was torn down: ", response.reason()));
    }
    if (response.complete()) {
      return std::vector<std::string>(response.payloads().begin(),
                                      response.payloads().end());
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous '", key, "': not every rank posted by the deadline",
      last.ok() ? ""
                : absl::StrCat(" (last error: ", last.error_message(), ")")));
}

}  // namespace moetune::worker
