#include "tuner/random_strategy.h"

namespace moetune::tuner {

std::vector<v1::Trial> RandomStrategy::SearchStep(
    const WorkloadSearch& search) const {
  return ProposeInOrder(
      search, SeededOrder(static_cast<int>(search.points.size()), search.seed));
}

}  // namespace moetune::tuner
