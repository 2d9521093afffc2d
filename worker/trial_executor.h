// TrialExecutor: how the worker agent gets a trial run. ChildProcessExecutor
// (production) runs it in a supervised child process with a deadline;
// InProcessExecutor runs the TrialRunner directly (tests, and the child side
// itself). Both return a result for every trial: failures are outcomes.
// Execute is called from one thread; Cancel-by-flag is thread-safe.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "proto/moetune.pb.h"
#include "worker/trial_runner.h"
#include "worker/warm_process.h"

namespace moetune::worker {

class TrialExecutor {
 public:
  virtual ~TrialExecutor() = default;
  // `cancel` is polled while the trial runs; when set the run is abandoned
  // and the result says CANCELLED.
  virtual v1::TrialResult Execute(const v1::TrialExecution& execution,
                                  const std::atomic<bool>* cancel) = 0;
};

class InProcessExecutor final : public TrialExecutor {
 public:
  explicit InProcessExecutor(TrialRunner* runner) : runner_(runner) {}
  v1::TrialResult Execute(const v1::TrialExecution& execution,
                          const std::atomic<bool>* cancel) override;

 private:
  TrialRunner* runner_;
};

// Runs `child_command` + the execution on stdin; expects a serialized
// TrialResult on stdout (see RunTrialChildMain).
class ChildProcessExecutor final : public TrialExecutor {
 public:
  explicit ChildProcessExecutor(std::vector<std::string> child_command)
      : child_command_(std::move(child_command)) {}
  v1::TrialResult Execute(const v1::TrialExecution& execution,
                          const std::atomic<bool>* cancel) override;

 private:
  std::vector<std::string> child_command_;
};

// Runs trials in a warm process (warm_process.h) that serves them one after
// another, so that trials of one workload pay its start-up, CUDA context,
// weights and caches once, and trials of the same model (the workload but
// its batch, context, routing and cache dtype) the start-up, context and
// weights. The process is replaced (the next trial starts clean) when the
// model changes, and after any trial that is not DONE: a crash, a hang or
// a sticky CUDA error still costs one trial.
//
// A gang trial (execution.gang set) never runs in the warm process: it runs
// in a fresh one through `run_command`, and the warm process is stopped
// first. An NCCL communicator and the peers' CUDA IPC mappings belong to
// one process and one gang: a process that served another gang, or another
// trial, would carry a communicator and mappings of ranks that are gone
// (and hold device memory the gang's process needs).
class WarmProcessExecutor final : public TrialExecutor {
 public:
  // serve_command: a process that runs RunTrialServeMain; run_command: one
  // that runs RunTrialChildMain (for gang trials).
  WarmProcessExecutor(std::vector<std::string> serve_command,
                      std::vector<std::string> run_command);
  v1::TrialResult Execute(const v1::TrialExecution& execution,
                          const std::atomic<bool>* cancel) override;

 private:
  WarmProcess process_;
  ChildProcessExecutor cold_;
  v1::Workload workload_;  // the model the running process was warmed with
};

// The child side: reads a TrialExecution from stdin, runs it, writes the
// TrialResult to stdout. Returns the process exit code.
int RunTrialChildMain(TrialRunner* runner);

// The warm child side: reads TrialExecution frames from stdin until its
// end, answering each with a TrialResult frame on stdout. Returns the
// process exit code (0 at end of input).
int RunTrialServeMain(TrialRunner* runner);

// The deadline a trial gets (its measurement's trial_timeout_s; default 120).
std::chrono::milliseconds TrialDeadline(const v1::Trial& trial);

}  // namespace moetune::worker
