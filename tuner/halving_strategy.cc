#include "tuner/halving_strategy.h"

#include <algorithm>
#include <utility>

namespace moetune::tuner {
namespace {

constexpr int kMaxScreeningRungs = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Iterations at rung r > 0 (see the header).
int RungIterations(int rung, int full, const Knobs& knobs) {
  const int base = knobs.min_iterations > 0 ? knobs.min_iterations : 3;
  int64_t divisor = 1;
  for (int i = 0; i < rung && divisor <= full; ++i) divisor *= knobs.eta;
  const int64_t scaled = full / divisor;
  return static_cast<int>(
      std::min<int64_t>(full, std::max<int64_t>(base, scaled)));
}

// The DONE trials of `rung` as (median, point), best first.
std::vector<std::pair<double, int>> Ranked(const WorkloadSearch& search,
                                           int rung) {
  std::vector<std::pair<double, int>> ranked;
  for (const v1::Trial* trial : search.trials) {
    const int point = search.PointOf(trial->config());
    if (trial->rung() != rung || !IsDone(*trial) || point < 0) continue;
    ranked.emplace_back(MedianOf(*trial), point);
  }
  std::sort(ranked.begin(), ranked.end());
  return ranked;
}

std::vector<v1::Trial> Promote(const WorkloadSearch& search, int from,
                               int iterations) {
  const std::vector<std::pair<double, int>> ranked = Ranked(search, from);
  const int64_t keep =
      CeilDiv(static_cast<int64_t>(ranked.size()), search.knobs.eta);
  int64_t slots = search.Slots(-1, iterations);
  std::vector<v1::Trial> out;
  for (int64_t i = 0; i < keep && slots > 0; ++i) {
    if (search.Proposed(ranked[i].second, from - 1)) continue;
    out.push_back(search.Make(ranked[i].second, from - 1, 0, iterations));
    --slots;
  }
  return out;
}

}  // namespace

RungPlan PlanRungs(int points, int full_iterations, const Knobs& knobs) {
  RungPlan plan;
  plan.iterations.push_back(full_iterations);
  int64_t survivors = points;  // configs at rung 0 with S rungs, S growing
  for (int s = 1; s <= kMaxScreeningRungs; ++s) {
    // With s screening rungs, rung 0 gets what s ceil-divisions by eta
    // leave of the grid.
    survivors = CeilDiv(survivors, knobs.eta);
    const int iterations = RungIterations(s, full_iterations, knobs);
    if (survivors < 2 || iterations >= plan.iterations.back()) break;
    plan.iterations.push_back(iterations);
  }
  return plan;
}

std::vector<v1::Trial> HalvingStrategy::SearchStep(
    const WorkloadSearch& search) const {
  const RungPlan plan = PlanRungs(static_cast<int>(search.points.size()),
                                  search.full_iterations, search.knobs);
  int lowest = plan.top() + 1;  // the lowest rung with trials
  for (const v1::Trial* trial : search.trials) {
    if (trial->rung() >= 0 && trial->rung() <= plan.top()) {
      lowest = std::min(lowest, trial->rung());
    }
  }
  if (lowest > plan.top()) {  // nothing yet: every point at the top rung
    std::vector<v1::Trial> out;
    int64_t slots = search.Slots(-1, plan.iterations.back());
    for (int p = 0; p < static_cast<int>(search.points.size()); ++p) {
      if (slots-- <= 0) break;
      out.push_back(search.Make(p, plan.top(), 0, plan.iterations.back()));
    }
    return out;
  }
  if (search.unfinished > 0 || lowest == 0) return {};
  return Promote(search, lowest, plan.iterations[lowest - 1]);
}

}  // namespace moetune::tuner
