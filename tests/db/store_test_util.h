// What the store tests build their rows from: trials, specs, results,
// fingerprints and probes with plausible defaults.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::db {

inline constexpr int64_t kT0 = 1'700'000'000'000;  // ms since the epoch

inline v1::Trial MakeTrial(const std::string& backend, const std::string& hash,
                           int batch = 1) {
  v1::Trial trial;
  trial.mutable_workload()->set_model_preset("tiny");
  trial.mutable_workload()->set_batch_size(batch);
  trial.mutable_config()->set_moe_backend(backend);
  trial.mutable_config()->set_tp(1);
  trial.set_workload_hash(hash);
  return trial;
}

inline v1::SweepSpec MakeSpec(const std::string& name) {
  v1::SweepSpec spec;
  spec.set_name(name);
  spec.mutable_measurement()->set_iterations(20);
  spec.mutable_measurement()->set_max_attempts(3);
  return spec;
}

inline v1::Fingerprint MakeFingerprint(const std::string& hash) {
  v1::Fingerprint fp;
  fp.set_device_name("NVIDIA H200");
  fp.set_sm_arch("sm_90");
  fp.set_sm_count(132);
  fp.set_build_hash("abc123");
  fp.set_hash(hash);
  return fp;
}

inline v1::TrialResult MakeResult(int64_t trial_id, int attempt,
                                  v1::TrialState outcome, double median_us) {
  v1::TrialResult result;
  result.set_trial_id(trial_id);
  result.set_attempt(attempt);
  result.set_outcome(outcome);
  result.mutable_stats()->set_median_us(median_us);
  result.mutable_stats()->set_samples(3);
  result.add_samples_us(median_us - 1);
  result.add_samples_us(median_us);
  result.add_samples_us(median_us + 1);
  result.set_worker_id("w1");
  *result.mutable_fingerprint() = MakeFingerprint("fp1");
  return result;
}

inline v1::Probe MakeProbe(
    const std::vector<std::pair<std::string, bool>>& backends,
    int64_t probed_at = 0) {
  v1::Probe probe;
  *probe.mutable_fingerprint() = MakeFingerprint("fp1");
  probe.mutable_device()->set_is_gpu(true);
  for (const auto& [name, available] : backends) {
    v1::BackendProbe* backend = probe.add_backends();
    backend->set_name(name);
    backend->set_available(available);
    if (!available) backend->set_reason("needs sm_100+, device is sm_90");
    backend->add_tiles()->set_block_n(64);
  }
  probe.set_probed_at_unix_ms(probed_at);
  return probe;
}

}  // namespace moetune::db
