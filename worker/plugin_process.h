// PluginProcess: the channel to one out-of-process backend (a plugin,
// docs/plugins.md): a request frame out, a reply frame back, with a
// deadline. The production one is a warm process (warm_process.h): a
// crash, a hang past the deadline or garbage on its stdout ends the process
// and is the call's outcome, never the worker's end; the next call starts a
// fresh one. Tests substitute a scripted one. Not thread-safe (one call at
// a time).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "worker/child_process.h"

namespace moetune::worker {

class PluginProcess {
 public:
  virtual ~PluginProcess() = default;
  // Sends `request` (starting the process when none runs) and waits for its
  // reply: kind kExited, exit_code 0 and stdout_data the reply, or why not.
  virtual ChildOutcome Call(const std::string& request,
                            std::chrono::milliseconds deadline) = 0;
  // Ends the process (no-op when none runs).
  virtual void Stop() = 0;
  // Whether a process runs now; false after it ended, even between calls.
  virtual bool Alive() = 0;
};

// `command` (argv, argv[0] a path) as a warm process.
std::unique_ptr<PluginProcess> MakeWarmPluginProcess(
    std::vector<std::string> command);

}  // namespace moetune::worker
