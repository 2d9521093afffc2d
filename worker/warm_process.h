// WarmProcess: a long-lived supervised child that serves one request at a
// time, each request and reply a frame (frames.h) on its stdin / stdout.
// A warm trial process keeps its CUDA context, weights and caches between
// trials; what makes a one-shot trial process safe stays true: a request
// that passes its deadline or is cancelled kills the whole process group,
// and a child that dies (a crash, an abort) is reported as the call's
// outcome. After either the process is gone, and the next Call starts a
// fresh one. Not thread-safe (one call at a time).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "worker/child_process.h"
#include "worker/spawn.h"

namespace moetune::worker {

class WarmProcess {
 public:
  explicit WarmProcess(std::vector<std::string> argv)
      : argv_(std::move(argv)) {}
  ~WarmProcess() { Stop(); }
  WarmProcess(const WarmProcess&) = delete;
  WarmProcess& operator=(const WarmProcess&) = delete;

  // Sends `request` (starting the process first when none is running) and
  // waits for its reply. A reply: kind kExited, exit_code 0, stdout_data
  // the reply, the process still running. Otherwise the outcome says why
  // (kSignaled / kExited: it died; kTimedOut / kCancelled: it was killed;
  // kSpawnFailed) and the process is gone. stderr_tail: this call's.
  ChildOutcome Call(const std::string& request,
                    std::chrono::milliseconds deadline,
                    const std::atomic<bool>* cancel);

  // Ends the process: closes its stdin (a serving child exits at end of
  // input), waits briefly, then kills its group. No-op when none runs.
  void Stop();

  bool running() const { return pid_ > 0; }
  // Whether a process runs now: one that ended between calls is forgotten
  // first (so that the next Call starts a fresh one).
  bool Alive() {
    ReapIfGone();
    return running();
  }
  // Replies the running process has given (0 for a fresh one).
  int calls_served() const { return served_; }

 private:
  bool Start(std::string* error);
  // Forgets a process that ended between calls (killed, out of memory).
  void ReapIfGone();
  // Whether the process has ended (its status still waiting to be reaped).
  bool Ended() const;
  // Kills its group, drains its stderr into out (when given), reaps it and
  // forgets it; its raw wait status.
  int Forget(ChildOutcome* out);
  ChildOutcome::Kind Exchange(const std::string& frame,
                              std::chrono::milliseconds deadline,
                              const std::atomic<bool>* cancel,
                              ChildOutcome* out);
  // Forget, with out's kind and status from the wait when it ended by
  // itself.
  void End(ChildOutcome* out);

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  ChildPipes pipes_;
  std::string pending_;  // stdout bytes not yet a whole frame
  int served_ = 0;
};

}  // namespace moetune::worker
