#include "worker/agent.h"

#include <chrono>
#include <thread>

#include "common/log.h"

namespace moetune::worker {
namespace {

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(int ms) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(ms));
  return context;
}

// Refusals that waiting will not change end the worker at once, saying
// what to fix; anything else (the coordinator not up yet) is retried.
absl::Status RegistrationRefused(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::FailedPreconditionError(
          "--coordinator: the address serves no WorkerControl; workers use "
          "the coordinator's --worker_listen address, not its public one");
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::PermissionDeniedError(
          "--token_file: the coordinator refused this worker (" +
          status.error_message() +
          "); a token with the `worker` role is "
          "needed");
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(status.error_message());
    default:
      return absl::OkStatus();
  }
}

}  // namespace

WorkerAgent::WorkerAgent(std::shared_ptr<grpc::Channel> channel,
                         AgentOptions options, v1::Probe probe,
                         TrialExecutor* executor)
    : stub_(v1::WorkerControl::NewStub(channel)),
      options_(std::move(options)),
      probe_(std::move(probe)),
      executor_(executor) {}

WorkerAgent::~WorkerAgent() { Stop(); }

// Graceful: the trial in flight finishes (it has its own deadline) and is
// reported; only cancellation from the coordinator kills it.
// The running trial is stopped too (its process killed) and not reported:
// its lease lapses and another worker runs it, whereas a CANCELLED report
// would end it for good.
void WorkerAgent::Stop() {
  stop_ = true;
  cancel_current_ = true;
}

bool WorkerAgent::SleepUnlessStopped(int ms) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop_ && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !stop_;
}

absl::Status WorkerAgent::Register() {
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options_.register_timeout_ms);
  v1::RegisterWorkerRequest request;
  request.set_name(options_.name);
  *request.mutable_probe() = probe_;
  {
    absl::MutexLock lock(&mu_);
    request.set_previous_worker_id(worker_id_);
    request.set_previous_token(token_);
  }
  auto next_warning = std::chrono::steady_clock::now();
  while (!stop_) {
    v1::RegisterWorkerResponse response;
    auto context = ContextWithDeadline(5000);
    const grpc::Status status =
        stub_->RegisterWorker(context.get(), request, &response);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      worker_id_ = response.worker_id();
      token_ = response.token();
      heartbeat_interval_ms_ = std::max(50, response.heartbeat_interval_ms());
      LogInfo("registered as ", worker_id_);
      return absl::OkStatus();
    }
    if (absl::Status fatal = RegistrationRefused(status); !fatal.ok()) {
      return fatal;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::UnavailableError("coordinator unreachable: " +
                                    status.error_message());
    }
    // Said at once and then every 10 s, so that a refused TLS handshake or
    // a wrong address is visible while the worker keeps trying.
    if (std::chrono::steady_clock::now() >= next_warning) {
      LogWarning("cannot register with the coordinator at ",
                 options_.coordinator_address, ": ", status.error_message(),
                 "; retrying until the registration timeout");
      next_warning =
          std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
    SleepUnlessStopped(250);
  }
  return absl::CancelledError("stopped before registering");
}

void WorkerAgent::HeartbeatLoop() {
  while (!stop_) {
    v1::HeartbeatRequest request;
    int interval_ms;
    {
      absl::MutexLock lock(&mu_);
      request.set_worker_id(worker_id_);
      request.set_token(token_);
      interval_ms = heartbeat_interval_ms_;
    }
    request.set_current_trial_id(current_trial_);
    v1::HeartbeatResponse response;
    auto context = ContextWithDeadline(std::max(1000, interval_ms));
    if (stub_->Heartbeat(context.get(), request, &response).ok()) {
      if (!response.known()) Reregister(request.token());
      if (response.cancel_trial()) {
        sweep_cancelled_ = true;
        cancel_current_ = true;
      }
    }
    SleepUnlessStopped(interval_ms);
  }
}

void WorkerAgent::Report(const v1::TrialResult& result) {
  v1::ReportResultRequest request;
  *request.mutable_result() = result;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options_.report_retry_ms);
  // Offered at least once, even by a worker that is stopping.
  for (int attempt = 0;; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      request.set_worker_id(worker_id_);
      request.set_token(token_);
    }
    v1::ReportResultResponse response;
    auto context = ContextWithDeadline(10000);
    const grpc::Status status =
        stub_->ReportResult(context.get(), request, &response);
    if (status.ok()) {
      if (!response.accepted() && !response.duplicate()) {
        LogWarning("result of trial ", result.trial_id(),
                   " not accepted: ", response.reason());
      }
      return;
    }
    LogWarning("report of trial ", result.trial_id(),
               " failed: ", status.error_message());
    if (std::chrono::steady_clock::now() > give_up) break;
    if (!SleepUnlessStopped(std::min(250 * (attempt + 1), 5000))) break;
  }
  LogError("gave up reporting trial ", result.trial_id(),
           "; the coordinator re-queues it once the heartbeats stop naming it");
}

void WorkerAgent::Reregister(const std::string& stale_token) {
  absl::MutexLock serial(&register_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (token_ != stale_token) return;  // the other thread already did
  }
  LogWarning(
      "the coordinator does not know this registration; registering "
      "again");
  (void)Register();
}

bool WorkerAgent::AcquireAndRun() {
  v1::AcquireTrialRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_worker_id(worker_id_);
    request.set_token(token_);
  }
  v1::AcquireTrialResponse response;
  auto context = ContextWithDeadline(10000);
  const grpc::Status status =
      stub_->AcquireTrial(context.get(), request, &response);
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    Reregister(request.token());
  }
  if (!status.ok() || !response.granted()) return false;
  v1::TrialExecution execution;
  *execution.mutable_trial() = response.trial();
  *execution.mutable_probe() = probe_;
  execution.set_device_ordinal(options_.device_ordinal);
  *execution.mutable_comm_calibration() = options_.comm_calibration;
  if (response.has_gang()) {
    // The trial process meets its gang as this worker (its pipe, not its
    // command line, carries the token).
    *execution.mutable_gang() = response.gang();
    execution.set_coordinator_address(options_.coordinator_address);
    execution.set_worker_id(request.worker_id());
    execution.set_token(request.token());
  }
  if (stop_) return false;  // stopped while acquiring: the lease lapses
  cancel_current_ = false;
  sweep_cancelled_ = false;
  current_trial_ = response.trial().trial_id();
  LogInfo("trial ", response.trial().trial_id(), ": ",
          response.trial().config().moe_backend(), " batch ",
          response.trial().workload().batch_size());
  v1::TrialResult result = executor_->Execute(execution, &cancel_current_);
  if (result.outcome() == v1::CANCELLED && stop_ && !sweep_cancelled_) {
    LogWarning("stopped during trial ", response.trial().trial_id(),
               "; it is re-queued when its lease lapses");
    current_trial_ = 0;
    return true;
  }
  result.set_worker_id(request.worker_id());
  Report(result);
  current_trial_ = 0;
  return true;
}

absl::Status WorkerAgent::Run() {
  if (absl::Status status = Register(); !status.ok()) return status;
  std::thread heartbeat([this] { HeartbeatLoop(); });
  int trials = 0;
  while (!stop_) {
    if (AcquireAndRun()) {
      if (options_.max_trials > 0 && ++trials >= options_.max_trials) break;
    } else {
      SleepUnlessStopped(options_.idle_poll_ms);
    }
  }
  stop_ = true;
  heartbeat.join();
  return absl::OkStatus();
}

}  // namespace moetune::worker
