// Helpers shared by the strategy and spec tests: small specs, a hand-made
// oracle that finishes trials with chosen medians, and a driver that runs a
// strategy to the end recording every Propose call. Test-only; not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/stats.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/moetune.pb.h"
#include "tuner/strategy.h"

namespace moetune::tuner::testing {

// A sweep of tiny's MoE layer at batch 1, context 64, with `rest` (text
// format: space, strategy, measurement, ...) parsed after that workload.
// A spec from text format.
inline v1::SweepSpec Parse(const std::string& text) {
  v1::SweepSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec))
      << text;
  return spec;
}

inline v1::SweepSpec TinyLayerSpec(const std::string& rest) {
  v1::SweepSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
            workload {
              model_preset: "tiny"
              batch_sizes: 1
              context_lengths: 64
              region: MOE_LAYER
            }
      )pb" +
          rest,
      &spec));
  return spec;
}

inline std::string RecordedPath() {
  return std::string(MOETUNE_SOURCE_DIR) +
         "/tests/data/recorded_cpu_sweep.json";
}

// Finishes `trial` (id `id`) DONE with `iterations` samples around
// `median_us` (median exactly median_us: symmetric +-1% steps), or with
// `state` when it is not DONE.
inline void Finish(v1::Trial& trial, int64_t id, double median_us,
                   v1::TrialState state = v1::DONE) {
  trial.set_trial_id(id);
  trial.set_state(state);
  trial.set_updated_at_unix_ms(id);
  v1::TrialResult& r = *trial.mutable_result();
  r.set_trial_id(id);
  r.set_outcome(state);
  r.mutable_fingerprint()->set_hash("fp");
  if (state != v1::DONE) return;
  const int n = trial.measurement().iterations();
  std::vector<double> samples;
  for (int i = 0; i < n; ++i) {
    samples.push_back(median_us *
                      (1.0 + 0.01 * (i - (n - 1) / 2.0) / std::max(1, n)));
  }
  r.mutable_samples_us()->Assign(samples.begin(), samples.end());
  *r.mutable_stats() = stats::Summarize(samples);
}

// Every point of `spec`'s plan, in grid order (INVALID_ARGUMENT for a bad
// spec).
inline absl::StatusOr<std::vector<v1::Trial>> Expand(
    const v1::SweepSpec& spec) {
  absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  if (!plan.ok()) return plan.status();
  return (*plan)->AllPoints();
}

// Plans `spec` as the coordinator does at submission (validated, normalised,
// expanded) and asks `strategy` for its proposals given `history`.
inline absl::StatusOr<std::vector<v1::Trial>> ProposeFor(
    Strategy& strategy, const v1::SweepSpec& spec,
    const std::vector<v1::Trial>& history) {
  absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  if (!plan.ok()) return plan.status();
  return strategy.Propose(**plan, history);
}

// A run of a strategy to the end: every Propose call's (history, answer).
struct Driven {
  std::vector<std::vector<v1::Trial>> histories;
  std::vector<std::vector<v1::Trial>> batches;
  std::vector<v1::Trial> trials;  // the final history
};

// Calls Propose until it returns nothing, finishing each batch through
// `finish(trial, id)` (which sets state and result).
inline Driven Drive(Strategy& strategy, const v1::SweepSpec& spec,
                    const std::function<void(v1::Trial&, int64_t)>& finish,
                    int max_rounds = 1000) {
  Driven driven;
  for (int round = 0; round < max_rounds; ++round) {
    absl::StatusOr<std::vector<v1::Trial>> batch =
        ProposeFor(strategy, spec, driven.trials);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok() || batch->empty()) break;
    driven.histories.push_back(driven.trials);
    driven.batches.push_back(*batch);
    for (v1::Trial& trial : *batch) {
      finish(trial, static_cast<int64_t>(driven.trials.size()) + 1);
      driven.trials.push_back(trial);
    }
  }
  return driven;
}

}  // namespace moetune::tuner::testing
