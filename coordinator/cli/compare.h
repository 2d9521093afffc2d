// The regression report behind `moetune compare`: each (workload, device,
// config) of a target sweep against a baseline sweep. Both sides' trials of
// one config are pooled (full-fidelity trials only); the verdict is called
// by the 95% intervals of the medians: faster or slower when they do not
// overlap, "same" (within noise) when they do. Results are matched only on
// the same device and software (the fingerprint); with across_builds the
// build hash is left out of the match, never the GPU. Floors and
// efficiencies on both sides use one bandwidth per device: the best read
// bandwidth recorded for it (any worker probe, or any trial's floor), so
// that a probe measured under load cannot flatter the efficiency (the
// coordinator re-floors each result it records the same way; results
// recorded without that, and the baseline, are brought to the same
// bandwidth here). Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::cli {

enum class Verdict {
  kFaster,      // the intervals do not overlap, target lower
  kSlower,      // the intervals do not overlap, target higher
  kSame,        // the intervals overlap: within noise
  kNew,         // measured in the target only
  kGone,        // measured in the baseline only
  kNowFailing,  // DONE in the baseline, not DONE in the target
  kFixed,       // not DONE in the baseline, DONE in the target
  kBothFailing,
};
const char* VerdictName(Verdict verdict);

// One config's figures in one sweep.
struct Side {
  bool present = false;
  v1::TrialState state = v1::TRIAL_STATE_UNSPECIFIED;  // DONE if any was
  int64_t trial_id = 0;  // the lowest id of the pooled trials
  int trials = 0;        // how many were pooled
  v1::TimingStats stats;
  double floor_us = 0;    // at the device's best recorded bandwidth
  double efficiency = 0;  // floor_us / median (0..1)
  std::string build_hash;
  std::string reason;  // why not DONE
};

struct ConfigComparison {
  std::string workload_hash;
  v1::Workload workload;
  std::string device;  // the device name (the fingerprint's)
  v1::TrialConfig config;
  Side baseline, target;
  double change = 0;  // (target - baseline) / baseline median; both DONE
  Verdict verdict = Verdict::kSame;
  bool regression = false;  // slower beyond the threshold, or now failing
};

struct WorkloadComparison {
  std::string workload_hash;
  v1::Workload workload;
  std::string device;
  const ConfigComparison* baseline_best = nullptr;  // lowest median, DONE
  const ConfigComparison* target_best = nullptr;
  double change = 0;  // target best vs baseline best
  Verdict verdict = Verdict::kSame;
};

struct CompareOptions {
  bool across_builds = false;
  double threshold_pct = -1;  // < 0: nothing is flagged a regression
  // coordinator::DeviceKind -> best read bandwidth (GB/s) known
  // from outside the two sweeps (the workers' probes).
  std::map<std::string, double> probed_gbps;
  // Worker id -> its probe's fingerprint: where a trial that left no result
  // of its own (a crash, a timeout, a lost lease) ran, so that a config that
  // crashes tonight is "now-failing", not missing.
  std::map<std::string, v1::Fingerprint> worker_fingerprints;
};

struct ComparisonReport {
  std::vector<ConfigComparison> configs;
  std::vector<WorkloadComparison> workloads;
  std::map<std::string, double> floor_gbps;  // DeviceKind -> GB/s used
  int regressions = 0;
  int compared = 0;  // configs present on both sides
  // The two sweeps had results matched only because of across_builds... or
  // would have: a hint for the message when nothing matched.
  bool would_match_across_builds = false;
};

ComparisonReport Compare(const std::vector<v1::Trial>& baseline,
                         const std::vector<v1::Trial>& target,
                         const CompareOptions& options);

}  // namespace moetune::cli
