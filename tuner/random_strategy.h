// RandomStrategy: the grid points of each workload in a seeded random order
// (strategy.seed mixed with the workload hash, so workloads draw
// differently), without replacement, full iterations. With max_trials only,
// the whole share is the first batch; with a GPU-second budget, at most
// kSecondsInFlight per workload are in flight and more follow as results
// arrive until the share is spent. Without any budget it is the grid in
// another order. Stateless; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/search.h"

namespace moetune::tuner {

class RandomStrategy final : public SearchStrategy {
 public:
  std::string_view name() const override { return "random"; }
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
