// WorkerAgent: the worker's life cycle against a coordinator. Register with
// the probe (getting an id and a secret token that every later call
// carries), heartbeat on a thread of its own (renewing the lease, learning of
// cancellation), and loop acquire -> execute (supervised) -> report, where a
// report is retried until the coordinator has it (reports are idempotent by
// trial and attempt). A worker the coordinator no longer knows registers
// again, naming its previous registration so that its leases are released.
// A report it gives up on leaves its lease to be re-queued (its heartbeats
// stop naming the trial). Run() is called once; Stop() from any thread.
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
  // How long a result is offered before the worker gives it up (the
  // coordinator then re-queues the trial: the heartbeats stop naming it).
  int report_retry_ms = 60000;
  // The coordinator's worker address as this worker dials it: a gang
  // trial's process meets its gang there (TrialExecution).
  std::string coordinator_address;
  // --comm_calibration: handed to every trial (TrialExecution), whose
  // modelled communication uses it.
  v1::CommCalibration comm_calibration;
};

class WorkerAgent {
 public:
  WorkerAgent(std::shared_ptr<grpc::Channel> channel, AgentOptions options,
              v1::Probe probe, TrialExecutor* executor);
  ~WorkerAgent();

  // Runs until Stop() or max_trials; an error only if the coordinator was
  // never reachable.
  absl::Status Run();
  // Also stops the running trial, which is left to be re-queued.
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

  // Registers again (after the coordinator forgot this registration or
  // refused its token), naming the previous one; once, when the heartbeat
  // thread and the main loop both find `stale_token` refused.
  void Reregister(const std::string& stale_token);

  absl::Mutex register_mu_;  // one re-registration at a time
  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  int heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 1000;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> current_trial_{0};
  std::atomic<bool> cancel_current_{false};
  std::atomic<bool> sweep_cancelled_{false};  // the heartbeat said so
};

}  // namespace moetune::worker
