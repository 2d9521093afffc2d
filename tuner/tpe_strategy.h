// TpeStrategy: a tree-structured Parzen estimator over the discrete
// dimensions of each workload's grid: backend, tile (conditional on the
// backend), tp, ep and cuda_graph (tp and ep apart: see tpe_strategy.cc).
//  1. initial_random points in the seeded random order (RandomStrategy's),
//     proposed together (kSecondsInFlight at a time under a GPU-second
//     budget). initial_random 0 = min(8, max(2, ceil(grid points / 12))),
//     and at most max(2, a third of the workload's max_trials share): a
//     model needs data, but a random phase that eats the budget leaves the
//     model nothing to do;
//  2. then kTpeInFlight at a time: the final trials are split into good (the
//     best gamma = 25% of the DONE ones by median, at least one; ties: grid
//     order) and bad (the other DONE ones, and every FAILED, INCORRECT,
//     TIMEOUT, UNAVAILABLE one, so that broken regions score low); per
//     dimension the categorical densities l(x) (good) and g(x) (bad) with
//     add-one smoothing over the values the grid has, the tile's counted
//     among trials of the same backend; each untried point scores
//     prod l(x) / g(x) (summed in logs) and the best scores are proposed
//     (ties: grid order). Without any DONE trial it keeps to the random order.
// It ends when every point was tried or the budget is spent.
// Stateless; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/search.h"

namespace moetune::tuner {

// Trials the model keeps in flight.
inline constexpr int kTpeInFlight = 2;
// Share of DONE trials that count as good.
inline constexpr double kTpeGamma = 0.25;

// The number of initial random trials for `search` (see above).
int InitialRandom(const WorkloadSearch& search);

// log(prod l/g) of every point of `search` under the model of its final
// trials (see above); exposed for tests.
std::vector<double> TpeScores(const WorkloadSearch& search);

class TpeStrategy final : public SearchStrategy {
 public:
  std::string_view name() const override { return "tpe"; }

 protected:
  std::vector<v1::Trial> SearchStep(
      const WorkloadSearch& search) const override;
};

}  // namespace moetune::tuner
