// GridStrategy: every point of the sweep's space, in ExpandSweep's order,
// enqueued up front; results never add trials. Not thread-safe (see
// strategy.h); it holds no state, so in practice any use is safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/strategy.h"

namespace moetune::tuner {

class GridStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "grid"; }
  // ExpandSweep(spec): the whole grid, capped by strategy.max_trials.
  absl::StatusOr<std::vector<v1::Trial>> InitialTrials(
      const v1::SweepSpec& spec) override;
  // Always empty: the grid is complete from the start.
  std::vector<v1::Trial> OnResult(const v1::Trial& finished) override;
};

}  // namespace moetune::tuner
