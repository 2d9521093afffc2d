#include "tuner/strategy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tuner/grid_strategy.h"
#include "tuner/halving_strategy.h"
#include "tuner/random_strategy.h"
#include "tuner/tpe_strategy.h"

namespace moetune::tuner {

Strategy::~Strategy() = default;

bool Strategy::ProposesAllAtOnce(const SweepPlan&) const { return false; }

absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const v1::Strategy& strategy) {
  switch (strategy.kind()) {
    case v1::Strategy::KIND_UNSPECIFIED:
    case v1::Strategy::GRID:
      return std::make_unique<GridStrategy>();
    case v1::Strategy::RANDOM:
      return std::make_unique<RandomStrategy>();
    case v1::Strategy::SUCCESSIVE_HALVING:
      return std::make_unique<HalvingStrategy>();
    case v1::Strategy::TPE:
      return std::make_unique<TpeStrategy>();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy.kind: ", strategy.kind(),
          " is not allowed; allowed: GRID, RANDOM, SUCCESSIVE_HALVING, TPE"));
  }
}

}  // namespace moetune::tuner
