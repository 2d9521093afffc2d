// A coordinator and workers as real processes on loopback, for the
// end-to-end tests: start, stop, kill and restart them, and read what the
// coordinator recorded through its public API.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/moetune.grpc.pb.h"
#include "tests/e2e/process.h"

namespace moetune::e2e {

inline const std::string kBin = MOETUNE_BIN_DIR;
inline const std::string kSource = MOETUNE_SOURCE_DIR;

// A fresh directory under the temp dir, named for the test and this process.
std::filesystem::path TempDir(const std::string& name);

// Twelve quick CPU trials of whole decode steps of the tiny preset.
v1::SweepSpec TwelveTrialSpec();

// A shell script that runs its arguments after `sleep_s` (0: at once),
// making every trial take at least that long; each start adds a line to
// dir/trial_starts.log (TrialStarts).
std::filesystem::path SlowWrapper(const std::filesystem::path& dir,
                                  double sleep_s);
// Trial processes started through dir's SlowWrapper so far.
int TrialStarts(const std::filesystem::path& dir);

// Polls `done` every 50 ms until it holds or `timeout_ms` passes.
bool WaitFor(const std::function<bool()>& done, int timeout_ms);

// Live (not zombie) processes whose command line contains `needle`.
std::vector<pid_t> ProcessesWith(const std::string& needle);

struct CoordinatorFlags {
  std::string db_path;  // "" = e2e.db in the cluster's directory
  std::string listen = "127.0.0.1:0";
  std::string worker_listen = "127.0.0.1:0";
  std::vector<std::string> extra;  // e.g. TLS and token flags
  // How the test's own client reaches the public API.
  std::string client_tls_ca;
  std::string client_token;
};

class Cluster {
 public:
  // Starts a coordinator on dir/e2e.db (lease 3 s, heartbeats 200 ms).
  explicit Cluster(const std::filesystem::path& dir,
                   CoordinatorFlags flags = {});

  // A CPU worker named `name` behind `wrapper` ("" for none).
  void AddWorker(const std::string& name, const std::string& wrapper = "",
                 const std::vector<std::string>& extra = {});
  int64_t Submit(const v1::SweepSpec& spec);
  // Follows WatchSweep to the end (or 180 s); returns the last progress.
  v1::Sweep WaitForEnd(int64_t sweep_id);
  // The same, returning how the stream ended.
  grpc::Status Watch(int64_t sweep_id, v1::Sweep* last);
  // Every trial of the sweep, page by page.
  std::vector<v1::Trial> Trials(int64_t sweep_id);
  int CountInState(int64_t sweep_id, v1::TrialState state);

  // kill -9 of the coordinator, then a new one on the same database and
  // addresses, as a supervisor would restart it.
  void KillAndRestartCoordinator();
  // kill -9 of worker i, then the same worker started again.
  void KillAndRestartWorker(int i);

  Process& coordinator() { return *coordinator_; }
  Process& worker(int i) { return *workers_[i]; }
  const std::string& address() const { return address_; }
  const std::string& worker_address() const { return worker_address_; }
  std::string db_path() const {
    return flags_.db_path.empty() ? (dir_ / "e2e.db").string() : flags_.db_path;
  }

 private:
  void StartCoordinator();

  std::filesystem::path dir_;
  CoordinatorFlags flags_;
  int restarts_ = 0;
  std::unique_ptr<Process> coordinator_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::vector<std::vector<std::string>> worker_argv_;
  std::vector<std::string> worker_logs_;
  std::string address_, worker_address_;
  std::unique_ptr<v1::Moetune::Stub> stub_;
};

}  // namespace moetune::e2e
