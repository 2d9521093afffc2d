// The clients of the load benchmark: fake CPU workers that take trials and
// report made-up DONE results at once (so that the coordinator, not the
// trials, is what is measured), and watchers that poll the public API as a
// dashboard would. Each records the latency of its calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace moetune::load {

// Call latencies (ms). Thread-safe.
class LatencyLog {
 public:
  void Add(double ms);
  std::vector<double> Sorted() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<double> ms_ ABSL_GUARDED_BY(mu_);
};

struct LoadState {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reported{0};  // results the coordinator accepted
  std::atomic<int64_t> errors{0};    // calls that failed
};

// Registers as worker `index` on `worker_address`, then acquires and reports
// until state->stop, heartbeating every `heartbeat_ms`.
void RunFakeWorker(const std::string& worker_address, int index,
                   int heartbeat_ms, LoadState* state, LatencyLog* acquire,
                   LatencyLog* report);

// Every `poll_ms`: GetSweep and the first page (100) of the sweep's trials.
void RunWatcher(const std::string& address, int64_t sweep_id, int poll_ms,
                LoadState* state, LatencyLog* poll);

}  // namespace moetune::load
