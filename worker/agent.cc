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
void WorkerAgent::Stop() { stop_ = true; }

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
  while (!stop_) {
    v1::RegisterWorkerResponse response;
    auto context = ContextWithDeadline(5000);
    const grpc::Status status =
        stub_->RegisterWorker(context.get(), request, &response);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      worker_id_ = response.worker_id();
      heartbeat_interval_ms_ = std::max(50, response.heartbeat_interval_ms());
      LogInfo("registered as ", worker_id_);
      return absl::OkStatus();
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::UnavailableError("coordinator unreachable: " +
                                    status.error_message());
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
      interval_ms = heartbeat_interval_ms_;
    }
    request.set_current_trial_id(current_trial_);
    v1::HeartbeatResponse response;
    auto context = ContextWithDeadline(std::max(1000, interval_ms));
    if (stub_->Heartbeat(context.get(), request, &response).ok()) {
      if (!response.known()) (void)Register();  // the coordinator restarted
      if (response.cancel_trial()) cancel_current_ = true;
    }
    SleepUnlessStopped(interval_ms);
  }
}

void WorkerAgent::Report(const v1::TrialResult& result) {
  v1::ReportResultRequest request;
  *request.mutable_result() = result;
  for (int attempt = 0; attempt < 20; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      request.set_worker_id(worker_id_);
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
               " failed (retrying): ", status.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(250 * (attempt + 1)));
  }
  LogError("gave up reporting trial ", result.trial_id(),
           "; its lease will lapse and it will be re-queued");
}

bool WorkerAgent::AcquireAndRun() {
  v1::AcquireTrialRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_worker_id(worker_id_);
  }
  v1::AcquireTrialResponse response;
  auto context = ContextWithDeadline(10000);
  if (!stub_->AcquireTrial(context.get(), request, &response).ok() ||
      !response.granted()) {
    return false;
  }
  v1::TrialExecution execution;
  *execution.mutable_trial() = response.trial();
  *execution.mutable_probe() = probe_;
  execution.set_device_ordinal(options_.device_ordinal);
  cancel_current_ = false;
  current_trial_ = response.trial().trial_id();
  LogInfo("trial ", response.trial().trial_id(), ": ",
          response.trial().config().moe_backend(), " batch ",
          response.trial().workload().batch_size());
  v1::TrialResult result = executor_->Execute(execution, &cancel_current_);
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
