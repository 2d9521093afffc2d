// Replay mode: runs a strategy against a recorded sweep instead of GPUs.
// The recorded trials are the oracle: a proposed trial gets `iterations`
// samples drawn with replacement from the recorded raw samples of the same
// (workload_hash, config) (all its recorded DONE trials pooled), or the
// recorded outcome when that config never ran DONE, or UNAVAILABLE when it
// was not recorded. Draws are seeded by (seed, proposal_key), so a replay is
// deterministic and independent of proposal order. No GPU, no clock.
// ReplayOracle is immutable after construction: thread-safe; RunReplay is a
// pure function of its arguments.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"
#include "tuner/strategy.h"

namespace moetune::tuner {

class ReplayOracle {
 public:
  explicit ReplayOracle(const v1::QueryTrialsResponse& recorded);
  // From protobuf's JSON mapping of a QueryTrialsResponse (what `moetune
  // results --format json` prints), each config's legacy all-reduce and
  // attention strings moved into its enums (NormalizeLegacyFields).
  // INVALID_ARGUMENT naming the problem.
  static absl::StatusOr<ReplayOracle> FromJson(std::string_view json);
  // NOT_FOUND when the file cannot be read; else as FromJson.
  static absl::StatusOr<ReplayOracle> FromJsonFile(const std::string& path);

  // The result `proposed` would have had: trial_id copied, attempt 1,
  // outcome DONE with proposed.measurement().iterations() drawn samples and
  // their Summarize() stats, the recorded fingerprint and roofline; or the
  // recorded non-DONE outcome and reason; or UNAVAILABLE "replay: config
  // not recorded".
  v1::TrialResult Simulate(const v1::Trial& proposed, uint64_t seed) const;

  // The recorded full-measurement median (us) of a config: the median of
  // its pooled rung-0 DONE samples (the recorded stats when there are no raw
  // samples); nullopt when it never ran DONE.
  std::optional<double> TrueMedianUs(const std::string& workload_hash,
                                     const v1::TrialConfig& config) const;

  const v1::QueryTrialsResponse& recorded() const { return recorded_; }

 private:
  struct Entry {
    std::vector<double> samples_us;  // pooled DONE rung-0 samples, sorted
    double median_us = 0;            // of samples_us, or recorded stats
    bool done = false;
    v1::TrialResult any_result;  // a recorded result (the last one)
  };
  const Entry* Find(const std::string& workload_hash,
                    const v1::TrialConfig& config) const;

  v1::QueryTrialsResponse recorded_;
  std::map<std::string, Entry> entries_;  // workload_hash|ConfigKey
};

// A spec whose grid is the recording's: model preset, layers, routing, seed
// and region of the first trial; batch sizes, context lengths, backends,
// tiles, tp, ep and cuda_graph values in first-appearance order (and
// all_reduce_impls, communication and attention_splits where any trial set
// them);
// measurement of the first trial; strategy GRID. INVALID_ARGUMENT when the
// recording has no trials.
absl::StatusOr<v1::SweepSpec> SpecFromRecording(
    const v1::QueryTrialsResponse& recorded);

struct ReplayRun {
  std::vector<v1::Trial> trials;  // every trial, final, ids 1, 2, ...
  double gpu_seconds = 0;         // sum of all samples / 1e6
  v1::GetBestResponse pick;       // SelectBest(trials)
  // Per pick.workloads(i): the recorded full median of the picked config
  // (+inf when the recording has none).
  std::vector<double> pick_true_median_us;
  int rounds = 0;  // Propose calls that returned trials
};

// Propose -> simulate every proposed trial (in order, ids assigned 1, 2, ...,
// updated_at_unix_ms = id) -> Propose again with the whole history, until
// Propose returns nothing. A bad spec is INVALID_ARGUMENT; INTERNAL if
// it proposes a key twice or keeps proposing past kMaxReplayTrials.
inline constexpr int kMaxReplayTrials = 1000000;
absl::StatusOr<ReplayRun> RunReplay(const v1::SweepSpec& spec,
                                    Strategy& strategy,
                                    const ReplayOracle& oracle, uint64_t seed);

}  // namespace moetune::tuner
