// TpeStrategy: a multi-fidelity, cross-workload tree-structured Parzen
// estimator (BOHB-like) over each workload's grid. Why: with ~16 points per
// workload and a quarter of the grid as budget, a model fed only full
// measurements of its own workload sees three or four points and cannot
// learn; cheap screening measurements and the other workloads' results give
// it many times the data for the same GPU-seconds.
//
// Fidelities. A screening trial runs at rung 1 with max(base, iterations /
// eta^2) timed iterations (base = min_iterations, else 3; 3 of 20 with the
// defaults: halving's cheapest rung); a full trial at rung 0. One fidelity
// (screening trials are full ones, rung 0: classic TPE) when the screening
// count is not below iterations, or under a max_trials budget without a
// GPU-second one (a screening trial then costs what a full one does).
//
// Observations. For every workload of the sweep (this one and the others:
// WorkloadSearch::others) and every point: its full median when it has a
// DONE rung-0 trial, else its screening median, in log(us); "failed" when it
// has only FAILED / INCORRECT / TIMEOUT / UNAVAILABLE trials. Workloads are
// put on one scale by the two-way fit log t(w, p) = offset_w + c_p (offset
// starts at the workload's median; then alternately c_p = mean of t -
// offset, offset_w = median of t - c_p): the normalised time y = log t -
// offset_w is a config's speed relative to its workload, which transfers
// between batch sizes (both recordings rank alike at every batch size).
// A workload's own median alone is biased when the workloads have run
// different points; the shared points align them.
//
// The decisions, per workload; a batch of at most kTpeInFlight trials, then
// it waits until the batch is final (every proposal sees every result):
//  1. Warm start (the first workload only): InitialRandom(search) screening
//     trials in a seeded random order, more in place of any that fail. The
//     other workloads wait for it (they see its queued trials in `others`),
//     then start from the model it fed; they warm-start on their own only
//     if it ended without InitialRandom DONE results. Waiting costs one
//     round of latency and saves blind measurements of slow configs on the
//     expensive workloads.
//  2. Screening (explore) by TPE: the pooled DONE observations, ranked by y,
//     with failed ones ranked below them all: the best ceil(gamma = 25% of
//     all, DONE and failed) DONE ones are good, none when there are fewer
//     than two observations; the other DONE ones are bad. Densities l (good)
//     and g (bad) with add-one smoothing per dimension: backend, tile
//     (counted within the backend), tp, ep, cuda_graph, allreduce,
//     communication, attention, and the config itself. A failure counts as bad
//     in the config dimension only: it says the config does not run, not that
//     its tp is slow (8x128 fails at tp 2 where 4x64 at tp 2 is the fastest).
//     The config dimension carries a point's own outcome over from other
//     workloads, and interactions the marginals cannot express. Points not yet
//     tried here with score log l/g > 0 are screened, best first (ties: grid
//     order); under a GPU-second budget every untried point that did not only
//     fail elsewhere is, in the same order (a budget is there to be used, and a
//     screening trial is the cheapest guard against the model's blind spots).
//     Screening leaves room for kFullReserve full trials (trials, and
//     GPU-seconds at the cheapest believed point).
//  3. Full measurement (exploit) by a surrogate + probability of
//     improvement, once nothing is left to screen: the belief about a
//     point's full log median is Gaussian, the precision-weighted mean of
//     (a) its screening median + the learnt fidelity bias b (mean full -
//     screen log ratio over points measured at both, on any workload),
//     variance se^2 + s_f^2 (se: standard error of the screening log
//     samples; s_f: the RMS residual of that bias), and (b) the transfer
//     prediction offset_w + the point's mean y on the other workloads,
//     variance s_t^2 (s_t: the RMS error of transfer predictions on the
//     points this workload has measured). b, s_f and s_t shrink towards
//     priors (0, kFidelitySigma, kTransferSigma) with the weight of
//     kPriorWeight pairs. A point earns a full trial when P(its full median
//     < the incumbent's, the best full median here) >= kMinImprovement;
//     highest probability first (ties: lower mean, grid order); with no
//     incumbent yet only the lowest mean goes, alone.
// It ends when neither list has an entry (or the budget is spent): no
// budget is needed to stop it.
// Budgets (search.h): every trial counts against max_trials. A GPU-second
// budget is checked by WorkloadSearch::Slots (the mean projection) and by
// the model's predicted cost of each trial (exp(mean) x iterations, when it
// has a belief), which keeps a slow config it already knows (dequant_cublas
// at batch 32: 62 ms a step) from eating the share.
// Deterministic in (spec, history); stateless; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tuner/search.h"

namespace moetune::tuner {

// Trials in one batch of the model, per workload.
inline constexpr int kTpeInFlight = 2;
// Share of DONE observations that count as good.
inline constexpr double kTpeGamma = 0.25;
// Trials (and GPU-seconds for that many full trials) screening leaves for
// full measurements.
inline constexpr int kFullReserve = 2;
// The probability of improvement a point needs for a full trial.
inline constexpr double kMinImprovement = 0.05;
// Priors (log units) of the fidelity residual and of the transfer error,
// and their weight in pairs.
inline constexpr double kFidelitySigma = 0.03;
inline constexpr double kTransferSigma = 0.3;
inline constexpr double kPriorWeight = 2.0;

// The number of DONE warm-start trials wanted: initial_random, or 0 =
// min(8, max(2, ceil(grid points / 12))), at most max(2, a third of the
// workload's max_trials share).
int InitialRandom(const WorkloadSearch& search);

// The screening fidelity: rung 1 with fewer iterations, or rung 0 when the
// screening count would not be below the full one.
struct Screening {
  int rung = 1;
  int iterations = 0;
};
Screening ScreeningOf(const WorkloadSearch& search);

// The warm-start points of `search`: a seeded order shared by the
// workloads, from entry workload_index x InitialRandom on (wrapping), as far
// as needed for InitialRandom points that did not fail here.
std::vector<int> WarmStartPoints(const WorkloadSearch& search);

// log(l/g) of every point of `search` under the TPE model of the sweep's
// observations (see above); exposed for tests.
std::vector<double> TpeScores(const WorkloadSearch& search);

// The surrogate's belief about a point's full log median (log us).
struct Belief {
  bool known = false;  // false: no screening here and no transfer
  double mean = 0;
  double sigma = 0;
};
std::vector<Belief> FullBeliefs(const WorkloadSearch& search);

class TpeStrategy final : public SearchStrategy {
 public:
  std::string_view name() const override { return "tpe"; }

 protected:
  std::vector<v1::Trial> SearchStep(
      const WorkloadSearch& search) const override;
  bool LearnsAcrossWorkloads() const override { return true; }
};

}  // namespace moetune::tuner
