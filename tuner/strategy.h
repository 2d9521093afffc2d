// The search-strategy interface the coordinator drives: a strategy proposes
// the first trials of a sweep and may propose more as results come in (grid
// now; random, successive halving and model-based strategies later).
// A Strategy instance belongs to one sweep and is not thread-safe: the
// coordinator calls it under the sweep's lock. MakeStrategy is thread-safe.
#pragma once

#include <memory>
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

  // Validates `spec` and returns the trials to enqueue now (QUEUED, ids 0:
  // the coordinator assigns them). INVALID_ARGUMENT for a bad spec, with the
  // message of ValidateSweepSpec.
  virtual absl::StatusOr<std::vector<v1::Trial>> InitialTrials(
      const v1::SweepSpec& spec) = 0;

  // Called once per trial that reached a final state (any outcome); returns
  // more trials to enqueue, possibly none.
  virtual std::vector<v1::Trial> OnResult(const v1::Trial& finished) = 0;
};

// The strategy for `strategy.kind` (UNSPECIFIED = GRID); INVALID_ARGUMENT
// "strategy.kind: ... allowed: GRID" for a kind this build does not know.
absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const v1::Strategy& strategy);

}  // namespace moetune::tuner
