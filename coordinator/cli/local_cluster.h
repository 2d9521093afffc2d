// LocalCluster: the CLI's embedded mode. An in-process coordinator on the
// given database, listening on a free loopback port, and (for sweeps) one
// moetune-worker process per GPU, or one CPU worker where there is none.
// CheckWorkers tells a sweep when its workers have died, so that it stops
// instead of waiting for one forever. The destructor stops the workers
// (SIGTERM, then SIGKILL after a grace period), ends the leases they held
// (Scheduler::ReleaseStoppedWorker: a cancelled sweep's trial is CANCELLED,
// a running sweep's re-queued), removes their logs unless kept, and stops
// the coordinator. Owned by main; CheckWorkers may also be called from
// another thread (the sweep's watcher), the rest only by main.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/cli/process_launcher.h"
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
  // Starts and watches the workers; null: the OS's (tests pass a fake).
  // Must outlive the cluster.
  ProcessLauncher* launcher = nullptr;
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

  // Reaps the workers that have exited since the last call and appends a
  // line for each to *exited_now ("worker local:1 exited (exit code 2); its
  // log: PATH"). OK while one still runs, or when none was started;
  // Unavailable once every worker has exited, naming each one's exit and
  // log: nothing is left to run a sweep's trials.
  // Once every started worker is registered, it also tells the scheduler
  // that no other worker will come (nothing else can reach this
  // coordinator): trials none of them can run need not wait its
  // unavailable grace (on a CPU machine the quick start's GPU-backend
  // trials would wait ~1 s of a 2 s sweep for it).
  absl::Status CheckWorkers(std::vector<std::string>* exited_now);
  // Whether CheckWorkers has seen every started worker registered.
  bool all_workers_registered();
  // Whether CheckWorkers has seen a worker exit (its log says why: keep it).
  bool any_worker_exited();

 private:
  struct Worker {
    std::string name;  // as it registers: "local:cpu", "local:0"
    pid_t pid = -1;
    std::string log;
    std::optional<ProcessExit> exit;  // once it has exited (and is reaped)
  };

  explicit LocalCluster(ProcessLauncher* launcher) : launcher_(launcher) {}
  absl::Status StartWorkers(const LocalClusterOptions& options);
  void StopWorkers();
  // Ends the leases of the workers that have exited, for good.
  void ReleaseLeases();
  // Polls the workers not known to have exited until none runs or
  // `deadline_ms` has passed; true when none runs.
  bool AwaitExits(int deadline_ms);

  ProcessLauncher* launcher_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  bool all_registered_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> worker_logs_;  // fixed once started
  bool keep_logs_ = false;
};

// The last `count` lines of the file at `path` (fewer when it has fewer;
// none when it cannot be read).
std::vector<std::string> LastLines(const std::string& path, int count);

// The directory of the running executable.
std::string SelfDirectory();

}  // namespace moetune::cli
