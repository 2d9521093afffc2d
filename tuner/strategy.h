// The search-strategy interface the coordinator drives. A strategy is
// stateless: Propose is a pure function of (the sweep's plan, every trial of
// the sweep so far), so a coordinator that restarts resumes a sweep by
// calling Propose with what its database holds, and nothing is ever
// proposed twice (proposal keys, config_key.h).
//
// Budgets (strategy.max_trials, strategy.max_gpu_seconds) are per sweep and
// split evenly between the sweep's workloads, each of which is searched on
// its own: workload i of W (the plan's order) may hold max_trials / W
// trials, plus one of the max_trials % W left over for the first ones, and
// max_gpu_seconds / W GPU-seconds (see search.h for how spending counts).
//
// Thread-safety: Strategy objects hold no mutable state; Propose may be
// called concurrently on one instance. MakeStrategy is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"
#include "tuner/config_key.h"
#include "tuner/sweep_plan.h"

namespace moetune::tuner {

class Strategy {
 public:
  virtual ~Strategy();

  // Short lowercase name for logs and the API, e.g. "grid".
  virtual std::string_view name() const = 0;

  // The trials to add now to the sweep planned by `plan`, given EVERY trial
  // of the sweep so far (any state; results for final ones), in the
  // coordinator's trial-id order. Deterministic in (plan, history); never
  // proposes a proposal_key already in history; empty history = the first
  // batch. Each proposal has state QUEUED, workload, workload_hash, config,
  // measurement (iterations for its rung), rung, confirm_round and
  // proposal_key; trial_id / sweep_id are 0 for the coordinator to assign.
  // Proposal order is the order to run them in. The sweep is finished when
  // nothing is queued/leased and this returns nothing.
  virtual std::vector<v1::Trial> Propose(
      const SweepPlan& plan, const std::vector<v1::Trial>& history) = 0;

  // True when the first batch is all this strategy will ever propose for
  // `plan` (Propose with any later history returns nothing): the scheduler
  // then need not read a sweep's history on every result, only once at the
  // end. False unless a strategy knows better.
  virtual bool ProposesAllAtOnce(const SweepPlan& plan) const;
};

// The strategy for `strategy.kind` (UNSPECIFIED = GRID); INVALID_ARGUMENT
// "strategy.kind: 42 is not allowed; allowed: GRID, RANDOM,
// SUCCESSIVE_HALVING, TPE" for a kind this build does not know.
absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const v1::Strategy& strategy);

}  // namespace moetune::tuner
