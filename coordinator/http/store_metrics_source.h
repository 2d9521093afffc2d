// StoreMetricsSource: the metrics snapshot read from the coordinator's
// database (the coordinator writes every state change there, so it is the
// truth a scrape should report) and its liveness rule. Reads only; as
// thread-safe as the Store.
#pragma once

#include "common/clock.h"
#include "coordinator/http/metrics_source.h"
#include "db/store.h"

namespace moetune::coordinator::http {

class StoreMetricsSource final : public MetricsSource {
 public:
  // Bests come from the newest `best_sweeps` sweeps (each winner is that of
  // the newest sweep that measured its workload): a scrape's cost stays
  // bounded however long the history is.
  StoreMetricsSource(db::Store* store, const Clock* clock, int64_t lease_ms,
                     int best_sweeps = 20)
      : store_(store),
        clock_(clock),
        lease_ms_(lease_ms),
        best_sweeps_(best_sweeps) {}

  absl::StatusOr<MetricsSnapshot> Snapshot() override;

 private:
  absl::Status AddTrialCounts(int64_t now_ms, MetricsSnapshot* snapshot);
  absl::Status AddBests(MetricsSnapshot* snapshot);

  db::Store* store_;
  const Clock* clock_;
  const int64_t lease_ms_;
  const int best_sweeps_;
};

}  // namespace moetune::coordinator::http
