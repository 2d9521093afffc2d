// GridStrategy: every point of the sweep's space once, in ExpandSweep's
// order, full iterations. Without a GPU-second budget the whole grid (cut to
// each workload's max_trials share) is the first batch; with one, at most
// kSecondsInFlight trials per workload are in flight until the share is spent.
// Stateless; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/search.h"

namespace moetune::tuner {

class GridStrategy final : public SearchStrategy {
 public:
  std::string_view name() const override { return "grid"; }
  // Without a GPU-second budget or a confirmation round the first batch is
  // the whole (share of the) space.
  bool ProposesAllAtOnce(const SweepPlan& plan) const override {
    return OnlyTrialBudget(plan);
  }

 protected:
  std::vector<v1::Trial> SearchStep(
      const WorkloadSearch& search) const override;
};

}  // namespace moetune::tuner
