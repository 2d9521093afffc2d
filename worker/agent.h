// WorkerAgent: the worker's life cycle against a coordinator. Register with
// the probe, heartbeat on a thread of its own (renewing the lease, learning of
// cancellation), and loop acquire -> execute (supervised) -> report, where a
// report is retried until the coordinator has it (reports are idempotent by
// trial and attempt). Run() is called once; Stop() from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/moetune.grpc.pb.h"
#include "worker/trial_executor.h"

namespace moetune::worker {

struct AgentOptions {
  std::string name;                 // host:device
  int device_ordinal = -1;          // -1 = CPU
  int idle_poll_ms = 300;           // wait between empty acquires
  int max_trials = 0;               // stop after this many trials; 0 = never
  int register_timeout_ms = 60000;  // give up reaching the coordinator
};

class WorkerAgent {
 public:
  WorkerAgent(std::shared_ptr<grpc::Channel> channel, AgentOptions options,
              v1::Probe probe, TrialExecutor* executor);
  ~WorkerAgent();

  // Runs until Stop() or max_trials; an error only if the coordinator was
  // never reachable.
  absl::Status Run();
  void Stop();

 private:
  absl::Status Register();
  void HeartbeatLoop();
  // One acquire; true if a trial ran.
  bool AcquireAndRun();
  void Report(const v1::TrialResult& result);
  bool SleepUnlessStopped(int ms);

  std::unique_ptr<v1::WorkerControl::Stub> stub_;
  const AgentOptions options_;
  const v1::Probe probe_;
  TrialExecutor* executor_;

  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  int heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 1000;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> current_trial_{0};
  std::atomic<bool> cancel_current_{false};
};

}  // namespace moetune::worker
