#include "tuner/tpe_strategy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/stable_hash.h"
#include "common/stats.h"

namespace moetune::tuner {
namespace {

// The dimensions: 0 backend, 1 backend|tile (conditional on 0), 2 tp, 3 ep,
// 4 cuda_graph, 5 allreduce, 6 communication, 7 attention, 8 the whole
// config. tp and ep are separate dimensions, not one (tp, ep) pair: "ep 8
// is fast" is learnt from any trial with ep 8. The config dimension
// remembers each point's own outcome (on any workload). A dimension with
// one value in the whole space (allreduce, communication and attention in
// spaces that do not list them) scores every point alike, so it changes no
// proposal.
constexpr int kDims = 9;
constexpr int kConfigDim = 8;
// Rounds of the offset fit (FitOffsets): the error shrinks about 4x a round.
constexpr int kOffsetIterations = 24;
using Values = std::array<std::string, kDims>;

Values ValuesOf(const v1::TrialConfig& config) {
  return {config.moe_backend(),
          absl::StrCat(config.moe_backend(), "|", TileText(config)),
          absl::StrCat(config.tp()),
          absl::StrCat(config.ep()),
          config.cuda_graph() ? "1" : "0",
          AllreduceName(config),
          IsMeasured(config) ? "measured" : "modelled",
          AttentionName(config),
          ConfigKey(config)};
}

std::vector<Values> PointValues(const WorkloadSearch& search) {
  std::vector<Values> values;
  for (const v1::Trial& point : search.points) {
    values.push_back(ValuesOf(point.config()));
  }
  return values;
}

// What one workload knows about one point (log us).
struct PointObs {
  bool failed = false;  // a final non-DONE trial (counts when not done())
  bool has_full = false;
  bool has_screen = false;
  double full = 0, screen = 0, screen_se = 0;
  bool done() const { return has_full || has_screen; }
  double best() const { return has_full ? full : screen; }
};

// One workload's observations by point, and its median (log us).
struct WorkloadObs {
  std::map<int, PointObs> points;
  bool has_ref = false;
  double ref = 0;
};

// Standard error of the mean of the trial's log samples (0 below 2).
double LogStandardError(const v1::Trial& trial) {
  std::vector<double> logs;
  for (double s : trial.result().samples_us()) {
    if (std::isfinite(s) && s > 0) logs.push_back(std::log(s));
  }
  const double n = static_cast<double>(logs.size());
  if (logs.size() < 2) return 0.0;
  double mean = 0, sq = 0;
  for (double x : logs) mean += x / n;
  for (double x : logs) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / (n - 1) / n);
}

void Observe(const WorkloadSearch& search, const Screening& screening,
             const v1::Trial& trial, WorkloadObs& obs) {
  const int point = search.PointOf(trial.config());
  const bool full = trial.rung() == 0;
  if (point < 0 || !IsFinal(trial.state()) || trial.state() == v1::CANCELLED ||
      (!full && trial.rung() != screening.rung)) {
    return;
  }
  PointObs& p = obs.points[point];
  const double median = MedianOf(trial);
  if (!IsDone(trial) || !(median > 0)) {
    p.failed = true;
    return;
  }
  if (full) {
    p.has_full = true;
    p.full = std::log(median);
  } else {
    p.has_screen = true;
    p.screen = std::log(median);
    p.screen_se = LogStandardError(trial);
  }
}

// The workload's median (log us) of its DONE points: the first guess of
// its offset.
void SetReference(WorkloadObs& obs) {
  std::vector<double> medians;
  for (const auto& [point, p] : obs.points) {
    if (p.done()) medians.push_back(p.best());
  }
  std::sort(medians.begin(), medians.end());
  obs.has_ref = !medians.empty();
  obs.ref = stats::Percentile(medians, 0.5);
}

// Fits the two-way model log t(w, p) = ref_w + c_p by alternating c_p = mean
// over workloads of (t - ref_w) and ref_w = median over points of (t - c_p):
// the workload's median alone is biased when the workloads have seen
// different points (ours are disjoint at first, by design), the shared
// points align them.
void FitOffsets(std::vector<WorkloadObs>& all) {
  for (WorkloadObs& obs : all) SetReference(obs);
  for (int iteration = 0; iteration < kOffsetIterations; ++iteration) {
    std::map<int, std::pair<double, int>> c;  // point -> (sum, count)
    for (const WorkloadObs& obs : all) {
      for (const auto& [point, p] : obs.points) {
        if (!p.done()) continue;
        c[point].first += p.best() - obs.ref;
        ++c[point].second;
      }
    }
    for (WorkloadObs& obs : all) {
      std::vector<double> offsets;
      for (const auto& [point, p] : obs.points) {
        if (!p.done()) continue;
        const auto& [sum, count] = c[point];
        offsets.push_back(p.best() - sum / count);
      }
      std::sort(offsets.begin(), offsets.end());
      if (!offsets.empty()) obs.ref = stats::Percentile(offsets, 0.5);
    }
  }
}

// [0] = this workload, then the others in order of first appearance.
std::vector<WorkloadObs> Observations(const WorkloadSearch& search) {
  const Screening screening = ScreeningOf(search);
  std::vector<WorkloadObs> all(1);
  for (const v1::Trial* trial : search.trials) {
    Observe(search, screening, *trial, all[0]);
  }
  std::map<std::string, size_t> index;
  for (const v1::Trial* trial : search.others) {
    auto [it, added] = index.emplace(trial->workload_hash(), all.size());
    if (added) all.emplace_back();
    Observe(search, screening, *trial, all[it->second]);
  }
  FitOffsets(all);
  return all;
}

// Counts of one group (good or bad) per dimension value.
struct Counts {
  int total = 0;   // observations in every dimension
  int failed = 0;  // failed ones: the config dimension only
  std::array<std::map<std::string, int>, kDims> of;
  void Add(const Values& values) {
    ++total;
    for (int d = 0; d < kDims; ++d) ++of[d][values[d]];
  }
  // A failure says that this config does not run, not that its tp or
  // backend is slow (8x128 fails at tp 2 where 4x64 is the fastest).
  void AddFailed(const Values& values) {
    ++failed;
    ++of[kConfigDim][values[kConfigDim]];
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
    const double n = tile
                         ? counts.Get(0, v[0])
                         : counts.total + (d == kConfigDim ? counts.failed : 0);
    const double k = tile ? domain.tiles_of_backend.at(v[0])
                          : static_cast<double>(domain.values[d].size());
    sum += std::log((counts.Get(d, v[d]) + 1.0) / (n + k));
  }
  return sum;
}

// Splits the pooled observations into good and bad (see the header).
std::pair<Counts, Counts> Split(const std::vector<WorkloadObs>& all,
                                const std::vector<Values>& values) {
  std::vector<std::tuple<double, size_t, int>> done;  // (y, workload, point)
  Counts good, bad;
  for (size_t w = 0; w < all.size(); ++w) {
    for (const auto& [point, p] : all[w].points) {
      if (p.done()) {
        done.emplace_back(p.best() - all[w].ref, w, point);
      } else if (p.failed) {
        bad.AddFailed(values[point]);
      }
    }
  }
  std::sort(done.begin(), done.end());
  // Failed points rank below every DONE one; a lone observation is not
  // "good" by comparison with anything.
  const size_t observed = done.size() + static_cast<size_t>(bad.failed);
  const size_t n_good =
      observed < 2
          ? 0
          : std::min(done.size(),
                     static_cast<size_t>(std::ceil(kTpeGamma * observed)));
  for (size_t i = 0; i < done.size(); ++i) {
    (i < n_good ? good : bad).Add(values[std::get<2>(done[i])]);
  }
  return {good, bad};
}

// Sum of squares shrunk towards a prior: sqrt((sum + w * prior^2) / (n + w)).
double Shrunk(double sum_sq, double n, double prior) {
  return std::sqrt((sum_sq + kPriorWeight * prior * prior) /
                   (n + kPriorWeight));
}

// The learnt links between observations: the screening -> full bias and
// residual, the other workloads' mean y per point and the transfer error.
struct Links {
  double bias = 0, fidelity_sigma = kFidelitySigma;
  double transfer_sigma = kTransferSigma;
  std::map<int, double> transfer_y;  // point -> mean y on other workloads
};

void FitFidelity(const std::vector<WorkloadObs>& all, Links& links) {
  std::vector<double> gaps;  // full - screen
  for (const WorkloadObs& obs : all) {
    for (const auto& [point, p] : obs.points) {
      if (p.has_full && p.has_screen) gaps.push_back(p.full - p.screen);
    }
  }
  const double n = static_cast<double>(gaps.size());
  double sum = 0, sq = 0;
  for (double g : gaps) sum += g;
  links.bias = sum / (n + kPriorWeight);
  for (double g : gaps) sq += (g - links.bias) * (g - links.bias);
  links.fidelity_sigma = Shrunk(sq, n, kFidelitySigma);
}

void FitTransfer(const std::vector<WorkloadObs>& all, Links& links) {
  std::map<int, std::pair<double, int>> sums;  // point -> (sum y, count)
  for (size_t w = 1; w < all.size(); ++w) {
    for (const auto& [point, p] : all[w].points) {
      if (!p.done()) continue;
      sums[point].first += p.best() - all[w].ref;
      ++sums[point].second;
    }
  }
  for (const auto& [point, s] : sums) {
    links.transfer_y[point] = s.first / s.second;
  }
  double sq = 0, n = 0;
  for (const auto& [point, p] : all[0].points) {
    auto it = links.transfer_y.find(point);
    if (!p.done() || it == links.transfer_y.end()) continue;
    const double error = p.best() - all[0].ref - it->second;
    sq += error * error;
    ++n;
  }
  links.transfer_sigma = Shrunk(sq, n, kTransferSigma);
}

Belief BeliefOf(const WorkloadObs& own, const Links& links, int point) {
  auto it = own.points.find(point);
  if (it != own.points.end() && it->second.has_full) {
    return {true, it->second.full, 0.0};
  }
  double precision = 0, weighted = 0;
  if (it != own.points.end() && it->second.has_screen) {
    const PointObs& p = it->second;
    const double var =
        p.screen_se * p.screen_se + links.fidelity_sigma * links.fidelity_sigma;
    precision += 1 / var;
    weighted += (p.screen + links.bias) / var;
  }
  auto t = links.transfer_y.find(point);
  if (own.has_ref && t != links.transfer_y.end()) {
    const double var = links.transfer_sigma * links.transfer_sigma;
    precision += 1 / var;
    weighted += (own.ref + t->second) / var;
  }
  if (precision == 0) return {};
  return {true, weighted / precision, std::sqrt(1 / precision)};
}

// The best own full median (log us); +inf when there is none.
double Incumbent(const WorkloadObs& own) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [point, p] : own.points) {
    if (p.has_full) best = std::min(best, p.full);
  }
  return best;
}

// P(a point with `belief` beats `incumbent`); 1 without an incumbent.
double ImprovementProbability(const Belief& belief, double incumbent) {
  if (!std::isfinite(incumbent)) return 1.0;
  if (belief.sigma <= 0) return belief.mean < incumbent ? 1.0 : 0.0;
  const double z = (incumbent - belief.mean) / belief.sigma;
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// True when the point has a trial at `rung` (any state) in the sweep.
bool Tried(const WorkloadSearch& search, int point, int rung) {
  return search.Proposed(point, rung);
}

// Proposes the points of `order` not yet at `rung`, up to `budget`'s slots,
// skipping a point whose predicted cost (when known) exceeds what is left.
std::vector<v1::Trial> ProposeList(const WorkloadSearch& budget,
                                   const std::vector<int>& order, int rung,
                                   int iterations, int cap,
                                   const std::vector<Belief>& beliefs) {
  std::vector<v1::Trial> out;
  int64_t slots = budget.Slots(cap, iterations);
  double left = budget.seconds_left;
  for (int point : order) {
    if (slots <= 0) break;
    if (Tried(budget, point, rung)) continue;
    if (budget.seconds_limited && beliefs[point].known) {
      const double cost = std::exp(beliefs[point].mean) * iterations / 1e6;
      if (cost > left) continue;
      left -= cost;
    }
    out.push_back(budget.Make(point, rung, 0, iterations));
    --slots;
  }
  return out;
}

// `search` with kFullReserve full trials (less those already proposed) kept
// back from its trial and GPU-second allowances.
WorkloadSearch WithFullReserve(const WorkloadSearch& search,
                               const std::vector<Belief>& beliefs) {
  int reserve = kFullReserve;
  for (int p = 0; p < static_cast<int>(search.points.size()); ++p) {
    if (Tried(search, p, 0)) --reserve;
  }
  WorkloadSearch reduced = search;
  if (reserve <= 0) return reduced;
  reduced.trials_left = std::max<int64_t>(0, search.trials_left - reserve);
  double per_iteration_us = search.seconds_per_iteration * 1e6;
  for (const Belief& b : beliefs) {
    if (b.known)
      per_iteration_us = std::min(per_iteration_us, std::exp(b.mean));
  }
  reduced.seconds_left -= reserve *
                          static_cast<double>(search.full_iterations) *
                          per_iteration_us / 1e6;
  return reduced;
}

// Points that only failed on the workloads where they ran.
std::set<int> FailedElsewhere(const WorkloadSearch& search) {
  std::set<int> failed;
  const std::vector<WorkloadObs> all = Observations(search);
  for (size_t w = 1; w < all.size(); ++w) {
    for (const auto& [point, p] : all[w].points) {
      if (p.failed && !p.done()) failed.insert(point);
    }
  }
  for (size_t w = 1; w < all.size(); ++w) {
    for (const auto& [point, p] : all[w].points) {
      if (p.done()) failed.erase(point);
    }
  }
  return failed;
}

// Decision 2: untried points with log l/g > 0 (under a GPU-second budget
// every untried point that did not fail elsewhere), best first.
std::vector<int> ScreeningOrder(const WorkloadSearch& search,
                                const Screening& screening) {
  const std::vector<double> scores = TpeScores(search);
  const std::set<int> failed = FailedElsewhere(search);
  std::vector<int> order;
  for (int p = 0; p < static_cast<int>(scores.size()); ++p) {
    const bool wanted =
        scores[p] > 0 || (search.seconds_limited && failed.count(p) == 0);
    if (wanted && !Tried(search, p, screening.rung) && !Tried(search, p, 0)) {
      order.push_back(p);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[a] > scores[b]; });
  return order;
}

// Decision 3: points without a full trial whose probability of improvement
// reaches kMinImprovement, best first.
std::vector<int> FullOrder(const WorkloadSearch& search,
                           const std::vector<Belief>& beliefs,
                           double incumbent) {
  std::vector<std::tuple<double, double, int>> ranked;  // (-PI, mean, point)
  for (int p = 0; p < static_cast<int>(beliefs.size()); ++p) {
    if (!beliefs[p].known || Tried(search, p, 0)) continue;
    const double pi = ImprovementProbability(beliefs[p], incumbent);
    if (pi >= kMinImprovement) ranked.emplace_back(-pi, beliefs[p].mean, p);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int> order;
  for (const auto& r : ranked) order.push_back(std::get<2>(r));
  return order;
}

std::vector<v1::Trial> ProposeFull(const WorkloadSearch& search,
                                   const std::vector<Belief>& beliefs) {
  const std::vector<WorkloadObs> all = Observations(search);
  const double incumbent = Incumbent(all[0]);
  std::vector<int> order = FullOrder(search, beliefs, incumbent);
  int cap = kTpeInFlight;
  if (!std::isfinite(incumbent)) {  // the first full trial goes alone
    cap = -1;
    if (order.size() > 1) order.resize(1);
  }
  return ProposeList(search, order, 0, search.full_iterations, cap, beliefs);
}

// True when the other workloads have at least InitialRandom DONE
// observations: enough for the model to start here without a warm start.
bool OthersInformed(const WorkloadSearch& search) {
  int done = 0;
  for (const v1::Trial* trial : search.others) done += IsDone(*trial) ? 1 : 0;
  return done >= InitialRandom(search);
}

// Workloads after the first wait for the others' results while the others
// are not informed yet (see the header): at the first call (empty history)
// and while the others' trials are in flight.
bool WaitForFirstWarmStart(const WorkloadSearch& search) {
  if (search.workload_index == 0 || OthersInformed(search)) return false;
  if (search.trials.empty() && search.others.empty()) return true;
  if (!search.trials.empty()) return false;  // warming up on its own
  for (const v1::Trial* trial : search.others) {
    if (!IsFinal(trial->state())) return true;
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

Screening ScreeningOf(const WorkloadSearch& search) {
  const Knobs& k = search.knobs;
  const int base = k.min_iterations > 0 ? k.min_iterations : 3;
  const int64_t eta2 = static_cast<int64_t>(k.eta) * k.eta;
  Screening screening;
  screening.iterations = static_cast<int>(std::max<int64_t>(
      base, search.full_iterations / std::max<int64_t>(1, eta2)));
  // Under a trial budget alone a screening trial costs what a full one
  // does: nothing to save, so every trial is full.
  const bool trials_only =
      search.trial_share > 0 &&
      search.trial_share < std::numeric_limits<int64_t>::max() &&
      !search.seconds_limited;
  if (screening.iterations >= search.full_iterations || trials_only) {
    screening.rung = 0;
    screening.iterations = search.full_iterations;
  }
  return screening;
}

std::vector<int> WarmStartPoints(const WorkloadSearch& search) {
  const int n = static_cast<int>(search.points.size());
  const int k = std::min(InitialRandom(search), n);
  const std::vector<int> order =
      SeededOrder(n, search.knobs.seed ^ Fnv1a64("tpe warm start"));
  std::map<int, bool> failed;  // point -> only failed final trials here
  for (const v1::Trial* trial : search.trials) {
    const int point = search.PointOf(trial->config());
    const bool bad = IsFinal(trial->state()) && !IsDone(*trial);
    auto [it, added] = failed.emplace(point, bad);
    if (!added) it->second = it->second && bad;
  }
  std::vector<int> points;
  const int64_t start = static_cast<int64_t>(search.workload_index) * k;
  int counted = 0;  // DONE, in flight or untried
  for (int j = 0; j < n && counted < k; ++j) {
    const int point = order[(start + j) % n];
    points.push_back(point);
    auto it = failed.find(point);
    if (it == failed.end() || !it->second) ++counted;
  }
  return points;
}

std::vector<double> TpeScores(const WorkloadSearch& search) {
  const std::vector<Values> points = PointValues(search);
  const Domain domain = DomainOf(points);
  const auto [good, bad] = Split(Observations(search), points);
  std::vector<double> scores;
  for (const Values& v : points) {
    scores.push_back(LogDensity(good, domain, v) - LogDensity(bad, domain, v));
  }
  return scores;
}

std::vector<Belief> FullBeliefs(const WorkloadSearch& search) {
  const std::vector<WorkloadObs> all = Observations(search);
  Links links;
  FitFidelity(all, links);
  FitTransfer(all, links);
  std::vector<Belief> beliefs;
  for (int p = 0; p < static_cast<int>(search.points.size()); ++p) {
    beliefs.push_back(BeliefOf(all[0], links, p));
  }
  return beliefs;
}

std::vector<v1::Trial> TpeStrategy::SearchStep(
    const WorkloadSearch& search) const {
  const Screening screening = ScreeningOf(search);
  const std::vector<Belief> beliefs = FullBeliefs(search);
  const WorkloadSearch reserved = WithFullReserve(search, beliefs);
  if (WaitForFirstWarmStart(search)) return {};
  const std::vector<int> warm =
      OthersInformed(search) ? std::vector<int>{} : WarmStartPoints(search);
  std::vector<int> pending;
  for (int p : warm) {
    if (!Tried(search, p, screening.rung) && !Tried(search, p, 0)) {
      pending.push_back(p);
    }
  }
  if (!pending.empty() && reserved.Slots(-1, screening.iterations) > 0) {
    return ProposeList(reserved, pending, screening.rung, screening.iterations,
                       0, beliefs);
  }
  // The model proposes a batch, then waits for all of it: every proposal
  // is made with every result of this workload.
  if (search.unfinished > 0) return {};
  const std::vector<int> screen = ScreeningOrder(search, screening);
  if (!screen.empty() && reserved.Slots(-1, screening.iterations) > 0) {
    std::vector<v1::Trial> out =
        ProposeList(reserved, screen, screening.rung, screening.iterations,
                    kTpeInFlight, beliefs);
    if (!out.empty()) return out;  // else nothing fits: full measurements
  }
  return ProposeFull(search, beliefs);
}

}  // namespace moetune::tuner
