// What every strategy shares: the per-workload view of a sweep that a search
// step reads (candidate points, the workload's history, what is left of its
// budget), the proposal builder, and SearchStrategy, which turns a
// per-workload search step into Strategy::Propose and appends the
// confirmation round (interleaved re-measurement of the top K) once a
// workload's search is over.
//
// Budget accounting, per workload (strategy.h says how budgets are split):
//  - trials: every trial of the workload counts (screening rungs and
//    confirmation included). When confirmation is on and max_trials is set,
//    K x rounds trials are held back from the search for it (when the
//    workload's share is larger than that).
//  - GPU-seconds: a finished trial costs the sum of its raw samples / 1e6.
//    What is still queued or leased, and what a new trial will cost, are
//    projected at the workload's mean seconds per timed iteration so far
//    (0 before any result, so the first batch always goes out): the search
//    adds a trial only while the projection stays within the share, and
//    keeps few in flight (kSecondsInFlight) so the projection learns. With
//    confirmation on, K x rounds full trials are projected in as well, so
//    the confirmation fits. The share can still be overshot by the noise of
//    the trials in flight.
// Pure functions and stateless classes; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/moetune.pb.h"
#include "tuner/strategy.h"

namespace moetune::tuner {

// Strategy knobs with the proto's "0 = default" resolved.
struct Knobs {
  uint64_t seed = 0;
  int eta = 3;             // 0 -> 3
  int min_iterations = 0;  // 0 = derived from iterations (see halving)
  int initial_random = 0;  // 0 = TPE's default (tpe_strategy.h)
  int confirm_top_k = 0;
  int confirm_rounds = 2;  // 0 -> 2
};
Knobs ResolveKnobs(const v1::Strategy& strategy);

// True when the plan's strategy has no GPU-second budget and no
// confirmation round: nothing a result says changes what is proposed.
bool OnlyTrialBudget(const SweepPlan& plan);

// True for every state but QUEUED, LEASED and UNSPECIFIED.
bool IsFinal(v1::TrialState state);
// GPU-seconds a trial cost: sum of result.samples_us / 1e6 once final.
double TrialGpuSeconds(const v1::Trial& trial);
// True when the trial ran to a DONE result that may rank (winner.h CanRank).
bool IsDone(const v1::Trial& trial);
// The trial's result median (us); +inf when it is not DONE.
double MedianOf(const v1::Trial& trial);

// One workload's search, as a search step sees it.
struct WorkloadSearch {
  std::string workload_hash;
  uint64_t seed = 0;  // knobs.seed mixed with the workload hash
  Knobs knobs;
  int full_iterations = 0;        // measurement.iterations of the spec
  std::vector<v1::Trial> points;  // candidate set in grid order: rung 0
  std::map<std::string, int> point_index;       // ConfigKey -> index in points
  const std::set<std::string>* keys = nullptr;  // every key of the sweep
  std::vector<const v1::Trial*> trials;         // its search trials (round 0)
  std::vector<const v1::Trial*> confirmations;  // its rounds > 0
  // The search trials (round 0) of the sweep's other workloads, in history
  // order, then what earlier workloads proposed in this same Propose call
  // (QUEUED), for strategies that learn across workloads (TPE); empty for
  // the others.
  std::vector<const v1::Trial*> others;
  int workload_index = 0;   // its place in the plan's workload order
  int unfinished = 0;       // its QUEUED / LEASED trials
  int64_t trial_share = 0;  // its whole max_trials share (or no limit)
  int64_t trials_left = 0;  // the search's remaining trial allowance
  bool seconds_limited = false;
  // GPU-seconds left to the search after the projected cost of what is in
  // flight (and of the confirmation round).
  double seconds_left = 0;
  double seconds_per_iteration = 0;  // mean so far; 0 before any result

  // Index of `config` in points; -1 when it is not a candidate.
  int PointOf(const v1::TrialConfig& config) const;
  // True when (point, rung, round) is already in the sweep.
  bool Proposed(int point, int rung, int round = 0) const;
  // How many trials of `iterations` (0 = full) the search may add now: at
  // most trials_left; under a GPU-second budget, as many as the projection
  // allows (none once spent); with in_flight_cap > 0, the cap minus what is
  // in flight. in_flight_cap 0 means kSecondsInFlight under a GPU-second
  // budget and no cap without one; < 0 means never a cap.
  int64_t Slots(int in_flight_cap = 0, int iterations = 0) const;
  // A QUEUED proposal of points[point] at `rung` / `round` with `iterations`
  // timed iterations, proposal_key set.
  v1::Trial Make(int point, int rung, int round, int iterations) const;
};

// Trials kept in flight under a GPU-second budget.
inline constexpr int kSecondsInFlight = 4;

// A seeded permutation of 0..n-1 (Fisher-Yates over SplitMix64).
std::vector<int> SeededOrder(int n, uint64_t seed);

// Proposes up to Slots(in_flight_cap) of the points in `order` that have no
// rung-0 trial yet, full iterations: grid and random search.
std::vector<v1::Trial> ProposeInOrder(const WorkloadSearch& search,
                                      const std::vector<int>& order,
                                      int in_flight_cap = 0);

// The confirmation round of one finished search: confirm_rounds interleaved
// rounds (A1 B1 C1 A2 B2 C2 ...) of its top confirm_top_k DONE rung-0 configs
// by median (ties: grid order), full iterations, cut to fit what is left of
// the workload's trial budget in whole rounds per config; none when a
// GPU-second budget is spent. `trials_left_total` is the workload's remaining
// trial allowance including the held-back part.
std::vector<v1::Trial> ProposeConfirmation(const WorkloadSearch& search,
                                           int64_t trials_left_total,
                                           bool seconds_left);

// Strategy::Propose for strategies that search each workload on its own:
// builds each workload's WorkloadSearch from the plan, calls SearchStep,
// drops anything already proposed, and proposes the confirmation round when
// a workload's search returns nothing with nothing in flight. A workload
// with confirmation trials is finished for good (and not searched again).
class SearchStrategy : public Strategy {
 public:
  std::vector<v1::Trial> Propose(const SweepPlan& plan,
                                 const std::vector<v1::Trial>& history) final;

 protected:
  // The search's next trials for one workload; empty = nothing to add now
  // (waiting for results) or the search is over.
  virtual std::vector<v1::Trial> SearchStep(
      const WorkloadSearch& search) const = 0;
  // True when SearchStep reads WorkloadSearch::others (left empty
  // otherwise: filling it costs workloads x history).
  virtual bool LearnsAcrossWorkloads() const { return false; }
};

}  // namespace moetune::tuner
