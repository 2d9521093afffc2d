// The coordinator under load: a real moetune-coordinator process on a fresh
// database, as the load benchmark starts it, samples its memory and stops
// it. Not thread-safe; owned by the benchmark's main thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace moetune::load {

class CoordinatorProcess {
 public:
  // Starts `binary` on `db_path` (loopback, any free ports), with its log
  // in `log_path`, and waits for it to listen.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(
      const std::string& binary, const std::string& db_path,
      const std::string& log_path);
  ~CoordinatorProcess();

  const std::string& address() const { return address_; }
  const std::string& worker_address() const { return worker_address_; }
  // Resident memory now, and its peak so far (MiB), from /proc.
  double RssMib() const;
  double PeakRssMib() const;
  // SIGTERM; the seconds until the process exited (or -1 past 30 s, when
  // it is killed).
  double Terminate();

 private:
  CoordinatorProcess() = default;
  pid_t pid_ = -1;
  std::string address_, worker_address_;
};

}  // namespace moetune::load
