#include "tuner/tpe_strategy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace moetune::tuner {
namespace {

// The dimensions: 0 backend, 1 backend|tile (conditional on 0), 2 tp, 3 ep,
// 4 cuda_graph. tp and ep are separate dimensions, not one (tp, ep) pair:
// with a pair, a value is seen at most once per trial and nothing carries
// over between pairs, while "ep 8 is fast" is learnt from any trial with
// ep 8.
constexpr int kDims = 5;
using Values = std::array<std::string, kDims>;

Values ValuesOf(const v1::TrialConfig& config) {
  const std::string tile =
      config.has_tile()
          ? absl::StrCat(config.tile().block_n(), "x", config.tile().block_k())
          : "-";
  return {config.moe_backend(), absl::StrCat(config.moe_backend(), "|", tile),
          absl::StrCat(config.tp()), absl::StrCat(config.ep()),
          config.cuda_graph() ? "1" : "0"};
}

// Counts of one group (good or bad) per dimension value.
struct Counts {
  int total = 0;
  std::array<std::map<std::string, int>, kDims> of;
  void Add(const Values& values) {
    ++total;
    for (int d = 0; d < kDims; ++d) ++of[d][values[d]];
  }
  int Get(int d, const std::string& value) const {
    auto it = of[d].find(value);
    return it == of[d].end() ? 0 : it->second;
  }
};

// How many values each dimension can take in the grid; the tile's per
// backend.
struct Domain {
  std::array<std::set<std::string>, kDims> values;
  std::map<std::string, int> tiles_of_backend;
};

Domain DomainOf(const std::vector<Values>& points) {
  Domain domain;
  for (const Values& v : points) {
    for (int d = 0; d < kDims; ++d) domain.values[d].insert(v[d]);
  }
  for (const std::string& tile : domain.values[1]) {
    ++domain.tiles_of_backend[tile.substr(0, tile.find('|'))];
  }
  return domain;
}

// log of the smoothed density of `v` in `counts`.
double LogDensity(const Counts& counts, const Domain& domain, const Values& v) {
  double sum = 0.0;
  for (int d = 0; d < kDims; ++d) {
    const bool tile = d == 1;
    const double n = tile ? counts.Get(0, v[0]) : counts.total;
    const double k = tile ? domain.tiles_of_backend.at(v[0])
                          : static_cast<double>(domain.values[d].size());
    sum += std::log((counts.Get(d, v[d]) + 1.0) / (n + k));
  }
  return sum;
}

// Splits the final trials into good and bad (see the header).
std::pair<Counts, Counts> SplitTrials(const WorkloadSearch& search,
                                      const std::vector<Values>& points) {
  std::vector<std::pair<double, int>> done;  // (median, point)
  Counts good, bad;
  for (const v1::Trial* trial : search.trials) {
    const int point = search.PointOf(trial->config());
    if (point < 0 || trial->rung() != 0 || !IsFinal(trial->state())) continue;
    if (IsDone(*trial)) {
      done.emplace_back(MedianOf(*trial), point);
    } else if (trial->state() != v1::CANCELLED) {
      bad.Add(points[point]);
    }
  }
  std::sort(done.begin(), done.end());
  const size_t n_good = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(kTpeGamma * done.size())));
  for (size_t i = 0; i < done.size(); ++i) {
    (i < n_good ? good : bad).Add(points[done[i].second]);
  }
  return {good, bad};
}

std::vector<Values> PointValues(const WorkloadSearch& search) {
  std::vector<Values> values;
  for (const v1::Trial& point : search.points) {
    values.push_back(ValuesOf(point.config()));
  }
  return values;
}

bool AnyDone(const WorkloadSearch& search) {
  for (const v1::Trial* trial : search.trials) {
    if (trial->rung() == 0 && IsDone(*trial)) return true;
  }
  return false;
}

}  // namespace

int InitialRandom(const WorkloadSearch& search) {
  if (search.knobs.initial_random > 0) return search.knobs.initial_random;
  const int64_t n = static_cast<int64_t>(search.points.size());
  int64_t initial = std::min<int64_t>(8, std::max<int64_t>(2, (n + 11) / 12));
  if (search.trial_share > 0) {
    initial = std::min(initial, std::max<int64_t>(2, search.trial_share / 3));
  }
  return static_cast<int>(initial);
}

std::vector<double> TpeScores(const WorkloadSearch& search) {
  const std::vector<Values> points = PointValues(search);
  const Domain domain = DomainOf(points);
  const auto [good, bad] = SplitTrials(search, points);
  std::vector<double> scores;
  for (const Values& v : points) {
    scores.push_back(LogDensity(good, domain, v) - LogDensity(bad, domain, v));
  }
  return scores;
}

std::vector<v1::Trial> TpeStrategy::SearchStep(
    const WorkloadSearch& search) const {
  const int n = static_cast<int>(search.points.size());
  const std::vector<int> random_order = SeededOrder(n, search.seed);
  const int initial = std::min(InitialRandom(search), n);
  if (static_cast<int>(search.trials.size()) < initial) {
    std::vector<int> head(random_order.begin(), random_order.begin() + initial);
    std::vector<v1::Trial> out = ProposeInOrder(search, head);
    const int64_t room = initial - static_cast<int64_t>(search.trials.size());
    if (static_cast<int64_t>(out.size()) > room) out.resize(room);
    return out;
  }
  if (!AnyDone(search))
    return ProposeInOrder(search, random_order, kTpeInFlight);
  const std::vector<double> scores = TpeScores(search);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[a] > scores[b]; });
  return ProposeInOrder(search, order, kTpeInFlight);
}

}  // namespace moetune::tuner
