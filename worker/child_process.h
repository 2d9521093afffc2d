// ChildProcess: runs a command in its own process group with stdin fed from
// a string, captures stdout and the tail of stderr, and enforces a deadline
// and a cancel flag (SIGKILL to the whole group). This is what lets a sticky
// CUDA error, an abort or a hang cost one trial, never the worker.
// Each call is independent; thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace moetune::worker {

struct ChildOutcome {
  enum class Kind { kExited, kSignaled, kTimedOut, kCancelled, kSpawnFailed };
  Kind kind = Kind::kSpawnFailed;
  int exit_code = -1;  // kExited
  int signal = 0;      // kSignaled
  std::string stdout_data;
  std::string stderr_tail;  // last few KB of stderr
  std::string error;        // kSpawnFailed
  // A warm process (warm_process.h) whose reply could not be read as a
  // frame: what was wrong with it ("" otherwise).
  std::string frame_error;
};

ChildOutcome RunChildProcess(const std::vector<std::string>& argv,
                             const std::string& stdin_data,
                             std::chrono::milliseconds deadline,
                             const std::atomic<bool>* cancel);

// Sets outcome's kind (kExited or kSignaled), exit code or signal from a
// raw wait status.
void SetExitStatus(int status, ChildOutcome* outcome);

// "killed by signal 11 (Segmentation fault)" style text for reports.
std::string DescribeOutcome(const ChildOutcome& outcome);

}  // namespace moetune::worker
