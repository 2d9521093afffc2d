// The CLI's door to the worker binary: the CLI is a client of the public API
// and does not link the worker, so what only a worker can find out (how many
// GPUs this machine has, what a probe of this machine says) comes from
// running `moetune-worker` beside the CLI. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

// moetune-worker beside this executable, or `override_path` when given.
std::string WorkerBinary(const std::string& override_path);

// The number of CUDA devices the worker binary sees (--count_gpus).
absl::StatusOr<int> CountGpus(const std::string& worker_binary);

// The worker binary's probe of `device` ("cpu" or an ordinal), with
// `extra_flags` on its command line (its --plugins and --model_library).
absl::StatusOr<v1::Probe> ProbeDevice(
    const std::string& worker_binary, const std::string& device,
    const std::vector<std::string>& extra_flags = {});

// Runs argv (argv[0] a path) to completion and returns its stdout; an error
// naming the command when it cannot start or exits non-zero.
absl::StatusOr<std::string> CaptureStdout(const std::vector<std::string>& argv);

}  // namespace moetune::cli
