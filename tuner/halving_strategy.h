// HalvingStrategy: successive halving per workload. Rung 0 is the full
// measurement; screening rungs count down to it. With S screening rungs the
// whole grid runs at rung S, then the best ceil(n / eta) of rung r's DONE
// trials (by median; FAILED, INCORRECT, ... never advance; ties: grid order)
// run at rung r - 1, until rung 0. A rung's promotions are proposed only once
// every trial of the workload's earlier rung is final.
//
// Iterations at rung r > 0: max(base, iterations / eta^r), base =
// min_iterations when set, else 3 (never above iterations).
// Rung count S: the largest S such that (a) ceil applied S times still keeps
// at least 2 configs at rung 0 and (b) every rung has strictly fewer
// iterations than the one below it (no rung that screens at the same
// fidelity). With 36 configs, 20 iterations and eta 3: S = 2, rungs of 3, 6
// and 20 iterations for 36, 12 and 4 configs. S = 0 (too few configs or
// iterations) is the grid at full iterations.
// Budgets: a rung is cut to the trial allowance; under a GPU-second budget
// rungs are proposed whole until the share is spent. Stateless; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/search.h"

namespace moetune::tuner {

// The rung plan for `points` configs: iterations[r] for r = 0..S.
struct RungPlan {
  std::vector<int> iterations;
  int top() const { return static_cast<int>(iterations.size()) - 1; }
};
RungPlan PlanRungs(int points, int full_iterations, const Knobs& knobs);

class HalvingStrategy final : public SearchStrategy {
 public:
  std::string_view name() const override { return "successive_halving"; }

 protected:
  std::vector<v1::Trial> SearchStep(
      const WorkloadSearch& search) const override;
};

}  // namespace moetune::tuner
