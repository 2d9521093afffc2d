#include "tuner/grid_strategy.h"

#include "tuner/spec.h"

namespace moetune::tuner {

absl::StatusOr<std::vector<v1::Trial>> GridStrategy::InitialTrials(
    const v1::SweepSpec& spec) {
  return ExpandSweep(spec);
}

std::vector<v1::Trial> GridStrategy::OnResult(const v1::Trial& /*finished*/) {
  return {};
}

}  // namespace moetune::tuner
