// ProcessStats: the standard Prometheus process series (start time, resident
// memory, open file descriptors), which prometheus-cpp does not collect. The
// interface keeps the reading apart from the exposition so that tests can
// point it at a fake /proc tree.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace moetune::coordinator::http {

struct ProcessStats {
  double start_time_seconds = 0;  // since the Unix epoch
  double resident_memory_bytes = 0;
  double open_fds = 0;
};

class ProcessStatsSource {
 public:
  virtual ~ProcessStatsSource() = default;
  virtual absl::StatusOr<ProcessStats> Read() = 0;
};

// Reads this process's numbers from procfs: `proc_root`/self/stat (start
// time in clock ticks after boot), `proc_root`/stat (btime, the boot time),
// `proc_root`/self/statm (resident pages) and `proc_root`/self/fd (one entry
// per open descriptor).
class ProcfsProcessStats final : public ProcessStatsSource {
 public:
  explicit ProcfsProcessStats(std::string proc_root = "/proc")
      : proc_root_(std::move(proc_root)) {}
  absl::StatusOr<ProcessStats> Read() override;

 private:
  absl::StatusOr<double> StartTimeSeconds() const;
  absl::StatusOr<double> ResidentBytes() const;
  absl::StatusOr<double> OpenFds() const;

  std::string proc_root_;
};

}  // namespace moetune::coordinator::http
