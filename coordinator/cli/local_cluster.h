// LocalCluster: the CLI's embedded mode. An in-process coordinator on the
// given database, listening on a free loopback port, and (for sweeps) one
// moetune-worker process per GPU, or one CPU worker where there is none.
// The destructor stops the workers (SIGTERM, then SIGKILL after a grace
// period), removes their logs unless kept, and stops the coordinator. Not
// thread-safe; owned by main.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/server.h"

namespace moetune::cli {

struct LocalClusterOptions {
  std::string db_path;
  bool start_workers = false;
  bool read_only = false;      // queries only: no writer lock, no writes
  std::string worker_binary;   // default: moetune-worker beside this binary
  std::string worker_log_dir;  // default: $TMPDIR or /tmp
  int gpu_count = 0;           // 0: one CPU worker
  // Each worker's --comm_calibration (a moetune-comm-bench --calibration
  // file); empty: not passed, and the workers use the model's assumptions.
  std::string comm_calibration;
};

// What one embedded worker is started with.
struct EmbeddedWorker {
  std::string binary;
  std::string coordinator;       // the coordinator's worker address
  std::string device;            // "cpu" or a GPU ordinal
  pid_t parent_pid = 0;          // the worker exits when this process dies
  std::string comm_calibration;  // empty: the flag is left out
};

// The worker's command line, argv[0] the binary.
std::vector<std::string> EmbeddedWorkerCommand(const EmbeddedWorker& worker);

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      const LocalClusterOptions& options);
  ~LocalCluster();

  const std::string& address() const { return server_->address(); }
  const std::vector<std::string>& worker_logs() const { return worker_logs_; }
  // By default the workers' logs are removed when the cluster stops; kept
  // (for reading after a failure) when set.
  void set_keep_logs(bool keep) { keep_logs_ = keep; }

 private:
  LocalCluster() = default;
  absl::Status SpawnWorker(const std::vector<std::string>& command,
                           const std::string& log_path);
  void StopWorkers();

  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::vector<pid_t> workers_;
  std::vector<std::string> worker_logs_;
  bool keep_logs_ = false;
};

// The directory of the running executable.
std::string SelfDirectory();

}  // namespace moetune::cli
