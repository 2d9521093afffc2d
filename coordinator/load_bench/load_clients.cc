#include "coordinator/load_bench/load_clients.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::load {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

// One TCP connection per client, as separate processes would have.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

std::unique_ptr<grpc::ClientContext> WithDeadline() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
  return context;
}

v1::Probe FakeCpuProbe() {
  v1::Probe probe;
  probe.mutable_fingerprint()->set_hash("load-bench-cpu");
  probe.mutable_fingerprint()->set_device_name("load bench (no trials run)");
  v1::BackendProbe* backend = probe.add_backends();
  backend->set_name("cpu_reference");
  backend->set_available(true);
  return probe;
}

// A plausible DONE result: ten samples around 100 us.
v1::TrialResult MadeUpResult(const v1::Trial& trial) {
  v1::TrialResult result;
  result.set_trial_id(trial.trial_id());
  result.set_attempt(trial.attempt());
  result.set_outcome(v1::DONE);
  for (int i = 0; i < 10; ++i) result.add_samples_us(100.0 + i);
  auto* stats = result.mutable_stats();
  stats->set_samples(10);
  stats->set_median_us(104.5);
  stats->set_mean_us(104.5);
  stats->set_ci_low_us(102);
  stats->set_ci_high_us(107);
  result.mutable_fingerprint()->set_hash("load-bench-cpu");
  return result;
}

// One fake worker's session with the coordinator.
class FakeWorker {
 public:
  FakeWorker(const std::string& address, LoadState* state)
      : stub_(v1::WorkerControl::NewStub(OwnChannel(address))), state_(state) {}

  bool Register(int index) {
    v1::RegisterWorkerRequest hello;
    hello.set_name("load:" + std::to_string(index));
    *hello.mutable_probe() = FakeCpuProbe();
    return Count(stub_->RegisterWorker(WithDeadline().get(), hello, &me_));
  }
  void Beat() {
    v1::HeartbeatRequest beat;
    beat.set_worker_id(me_.worker_id());
    beat.set_token(me_.token());
    v1::HeartbeatResponse ignored;
    Count(stub_->Heartbeat(WithDeadline().get(), beat, &ignored));
  }
  // A trial, or none (nothing left, or the call failed).
  std::optional<v1::Trial> Acquire(LatencyLog* latency) {
    v1::AcquireTrialRequest ask;
    ask.set_worker_id(me_.worker_id());
    ask.set_token(me_.token());
    v1::AcquireTrialResponse granted;
    const auto asked = Clock::now();
    const bool ok =
        Count(stub_->AcquireTrial(WithDeadline().get(), ask, &granted));
    latency->Add(MsSince(asked));
    if (!ok || !granted.granted()) return std::nullopt;
    return granted.trial();
  }
  void Report(const v1::Trial& trial, LatencyLog* latency) {
    v1::ReportResultRequest done;
    done.set_worker_id(me_.worker_id());
    done.set_token(me_.token());
    *done.mutable_result() = MadeUpResult(trial);
    v1::ReportResultResponse answer;
    const auto sent = Clock::now();
    const bool ok =
        Count(stub_->ReportResult(WithDeadline().get(), done, &answer));
    latency->Add(MsSince(sent));
    if (ok && answer.accepted()) ++state_->reported;
  }

 private:
  bool Count(const grpc::Status& status) {
    if (!status.ok()) ++state_->errors;
    return status.ok();
  }

  std::unique_ptr<v1::WorkerControl::Stub> stub_;
  LoadState* state_;
  v1::RegisterWorkerResponse me_;
};

}  // namespace

void LatencyLog::Add(double ms) {
  absl::MutexLock lock(&mu_);
  ms_.push_back(ms);
}

std::vector<double> LatencyLog::Sorted() const {
  absl::MutexLock lock(&mu_);
  std::vector<double> sorted = ms_;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void RunFakeWorker(const std::string& worker_address, int index,
                   int heartbeat_ms, LoadState* state, LatencyLog* acquire,
                   LatencyLog* report) {
  FakeWorker worker(worker_address, state);
  if (!worker.Register(index)) return;
  auto last_beat = Clock::now();
  while (!state->stop) {
    if (MsSince(last_beat) >= heartbeat_ms) {
      worker.Beat();
      last_beat = Clock::now();
    }
    const std::optional<v1::Trial> trial = worker.Acquire(acquire);
    if (trial.has_value()) {
      worker.Report(*trial, report);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void RunWatcher(const std::string& address, int64_t sweep_id, int poll_ms,
                LoadState* state, LatencyLog* poll) {
  auto stub = v1::Moetune::NewStub(OwnChannel(address));
  while (!state->stop) {
    const auto start = Clock::now();
    v1::GetSweepRequest get;
    get.set_sweep_id(sweep_id);
    v1::Sweep sweep;
    bool ok = stub->GetSweep(WithDeadline().get(), get, &sweep).ok();
    v1::TrialFilter filter;
    filter.set_sweep_id(sweep_id);
    filter.set_page_size(100);
    v1::QueryTrialsResponse page;
    ok = stub->QueryTrials(WithDeadline().get(), filter, &page).ok() && ok;
    poll->Add(MsSince(start));
    if (!ok) ++state->errors;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

}  // namespace moetune::load
