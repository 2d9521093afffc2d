// The search-strategy interface the coordinator drives, and the identity of a
// proposal. A strategy is stateless: Propose is a pure function of (spec,
// every trial of the sweep so far), so a coordinator that restarts resumes a
// sweep by calling Propose with what its database holds, and nothing is ever
// proposed twice (proposal keys).
//
// Budgets (strategy.max_trials, strategy.max_gpu_seconds) are per sweep and
// split evenly between the sweep's workloads, each of which is searched on
// its own: workload i of W (ExpandSweep's order) may hold max_trials / W
// trials, plus one of the max_trials % W left over for the first ones, and
// max_gpu_seconds / W GPU-seconds (see search.h for how spending counts).
//
// Thread-safety: Strategy objects hold no mutable state; Propose may be
// called concurrently on one instance. MakeStrategy and ProposalKey are
// thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::tuner {

class Strategy {
 public:
  virtual ~Strategy();

  // Short lowercase name for logs and the API, e.g. "grid".
  virtual std::string_view name() const = 0;

  // The trials to add now, given EVERY trial of the sweep so far (any state;
  // results for final ones), in the coordinator's trial-id order.
  // Deterministic in (spec, history); never proposes a proposal_key already
  // in history; empty history = the first batch. Each proposal has state
  // QUEUED, workload, workload_hash, config, measurement (iterations for its
  // rung), rung, confirm_round and proposal_key; trial_id / sweep_id are 0
  // for the coordinator to assign. Proposal order is the order to run them
  // in. INVALID_ARGUMENT for a bad spec (ValidateSweepSpec's message). The
  // sweep is finished when nothing is queued/leased and this returns nothing.
  virtual absl::StatusOr<std::vector<v1::Trial>> Propose(
      const v1::SweepSpec& spec, const std::vector<v1::Trial>& history) = 0;

  // Propose(spec, {}): kept so that callers written against the first
  // interface keep building. New code calls Propose.
  absl::StatusOr<std::vector<v1::Trial>> InitialTrials(
      const v1::SweepSpec& spec) {
    return Propose(spec, {});
  }
};

// The strategy for `strategy.kind` (UNSPECIFIED = GRID); INVALID_ARGUMENT
// "strategy.kind: 42 is not allowed; allowed: GRID, RANDOM,
// SUCCESSIVE_HALVING, TPE" for a kind this build does not know.
absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const v1::Strategy& strategy);

// "backend|tile|tp|ep|graph" of a config, e.g. "cpu_blocked|4x64|2|4|0"
// ("-" for an unset tile): which configs are the same point of the space.
std::string ConfigKey(const v1::TrialConfig& config);

// "workload_hash|backend|tile|tp|ep|graph|rung|round", e.g.
// "90d306c702e9773b|cpu_blocked|4x64|2|4|0|0|1".
std::string ProposalKey(const v1::Trial& trial);

}  // namespace moetune::tuner
