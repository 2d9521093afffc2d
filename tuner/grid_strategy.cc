#include "tuner/grid_strategy.h"

namespace moetune::tuner {

std::vector<v1::Trial> GridStrategy::SearchStep(
    const WorkloadSearch& search) const {
  std::vector<int> order(search.points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  return ProposeInOrder(search, order);
}

}  // namespace moetune::tuner
