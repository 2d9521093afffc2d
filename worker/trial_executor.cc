#include "worker/trial_executor.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "worker/child_process.h"
#include "worker/frames.h"

namespace moetune::worker {
namespace {

v1::TrialResult Outcome(const v1::Trial& trial, v1::TrialState state,
                        const std::string& reason) {
  v1::TrialResult result;
  result.set_trial_id(trial.trial_id());
  result.set_attempt(trial.attempt());
  result.set_outcome(state);
  result.set_reason(reason);
  return result;
}

// A warm process that ended without a reply: how.
std::string DescribeWarmOutcome(const ChildOutcome& outcome) {
  if (outcome.kind == ChildOutcome::Kind::kExited && outcome.exit_code == -1) {
    return "trial process ended its output without a result";
  }
  return DescribeOutcome(outcome);
}

v1::TrialState StateFor(const ChildOutcome& outcome) {
  switch (outcome.kind) {
    case ChildOutcome::Kind::kTimedOut:
      return v1::TIMEOUT;
    case ChildOutcome::Kind::kCancelled:
      return v1::CANCELLED;
    default:
      return v1::FAILED;
  }
}

// What a warm process's cached weights depend on: the workload without its
// batch, context, routing and cache dtype. A trial of another batch or
// context reuses the process, its CUDA context and (same shard) its
// weights; the runtimes keep one set of caches and activations, made again
// for the new sizes (a fresh process a batch size costs a 100-trial step
// sweep 4 processes, ~1.7 s of its 5.4 s outside the timed work).
v1::Workload WeightsOf(v1::Workload workload) {
  workload.clear_batch_size();
  workload.clear_context_length();
  workload.clear_routing();
  workload.clear_kv_cache_dtype();
  return workload;
}

}  // namespace

std::chrono::milliseconds TrialDeadline(const v1::Trial& trial) {
  const double seconds = trial.measurement().trial_timeout_s() > 0
                             ? trial.measurement().trial_timeout_s()
                             : 120.0;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

v1::TrialResult InProcessExecutor::Execute(const v1::TrialExecution& execution,
                                           const std::atomic<bool>* cancel) {
  if (cancel != nullptr && cancel->load()) {
    return Outcome(execution.trial(), v1::CANCELLED, "sweep cancelled");
  }
  return runner_->Run(execution);
}

v1::TrialResult ChildProcessExecutor::Execute(
    const v1::TrialExecution& execution, const std::atomic<bool>* cancel) {
  const v1::Trial& trial = execution.trial();
  const auto start = std::chrono::steady_clock::now();
  const ChildOutcome outcome =
      RunChildProcess(child_command_, execution.SerializeAsString(),
                      TrialDeadline(trial), cancel);
  const std::chrono::duration<double> wall =
      std::chrono::steady_clock::now() - start;
  const bool clean_exit =
      outcome.kind == ChildOutcome::Kind::kExited && outcome.exit_code == 0;
  v1::TrialResult result;
  if (clean_exit && result.ParseFromString(outcome.stdout_data)) {
    result.set_wall_s(wall.count());
    return result;
  }
  std::string reason = DescribeOutcome(outcome);
  if (!outcome.stderr_tail.empty()) {
    absl::StrAppend(&reason, "; stderr: ", outcome.stderr_tail);
  }
  if (clean_exit) absl::StrAppend(&reason, "; its result did not parse");
  result = Outcome(trial, StateFor(outcome), reason);
  result.set_wall_s(wall.count());
  return result;
}

WarmProcessExecutor::WarmProcessExecutor(std::vector<std::string> serve_command,
                                         std::vector<std::string> run_command)
    : process_(std::move(serve_command)), cold_(std::move(run_command)) {}

v1::TrialResult WarmProcessExecutor::Execute(
    const v1::TrialExecution& execution, const std::atomic<bool>* cancel) {
  if (execution.has_gang()) {  // see the class comment
    process_.Stop();
    return cold_.Execute(execution, cancel);
  }
  const v1::Trial& trial = execution.trial();
  const v1::Workload model = WeightsOf(trial.workload());
  if (process_.running() &&
      !google::protobuf::util::MessageDifferencer::Equals(workload_, model)) {
    process_.Stop();  // other weights: they would only add up
  }
  workload_ = model;
  const int before = process_.running() ? process_.calls_served() : 0;
  const auto start = std::chrono::steady_clock::now();
  const ChildOutcome outcome = process_.Call(execution.SerializeAsString(),
                                             TrialDeadline(trial), cancel);
  const std::chrono::duration<double> wall =
      std::chrono::steady_clock::now() - start;
  v1::TrialResult result;
  const bool replied = outcome.kind == ChildOutcome::Kind::kExited &&
                       outcome.exit_code == 0 && process_.running();
  if (!replied || !result.ParseFromString(outcome.stdout_data)) {
    std::string reason =
        replied ? "its result did not parse" : DescribeWarmOutcome(outcome);
    if (!outcome.stderr_tail.empty()) {
      absl::StrAppend(&reason, "; stderr: ", outcome.stderr_tail);
    }
    result = Outcome(trial, StateFor(outcome), reason);
    process_.Stop();
  } else if (result.outcome() != v1::DONE) {
    process_.Stop();  // whatever went wrong stays with this trial
  }
  result.set_wall_s(wall.count());
  result.set_process_trials(before);
  return result;
}

int RunTrialServeMain(TrialRunner* runner) {
  // Stdout carries the result frames alone: anything a library prints goes
  // to stderr instead, where the supervisor keeps its tail.
  const int result_fd = dup(STDOUT_FILENO);
  if (result_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 3;
  std::string request;
  while (ReadFrame(STDIN_FILENO, &request)) {
    v1::TrialExecution execution;
    if (!execution.ParseFromString(request)) {
      std::cerr << "trial server: a frame is not a TrialExecution\n";
      return 2;
    }
    const v1::TrialResult result = runner->Run(execution);
    if (!WriteAll(result_fd, EncodeFrame(result.SerializeAsString()))) {
      return 3;
    }
  }
  close(result_fd);
  return 0;
}

int RunTrialChildMain(TrialRunner* runner) {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  v1::TrialExecution execution;
  if (!execution.ParseFromString(input)) {
    std::cerr << "trial child: stdin is not a TrialExecution\n";
    return 2;
  }
  // Stdout carries the result alone: anything a library prints goes to
  // stderr instead, where the supervisor keeps its tail.
  const int result_fd = dup(STDOUT_FILENO);
  if (result_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 3;
  const v1::TrialResult result = runner->Run(execution);
  const std::string bytes = result.SerializeAsString();
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n =
        write(result_fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) return 3;
    written += static_cast<size_t>(n);
  }
  close(result_fd);
  return 0;
}

}  // namespace moetune::worker
