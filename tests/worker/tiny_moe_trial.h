// Test support: a one-rank MoE_LAYER trial of the tiny preset for a CPU
// worker (device -1), as the worker tests hand them to executors and runners.
#pragma once

#include <cstdint>
#include <string>

#include "proto/moetune.pb.h"

namespace moetune::worker::testing {

inline v1::TrialExecution TinyMoeTrial(int64_t id, const std::string& backend,
                                       int batch, uint64_t seed) {
  v1::TrialExecution execution;
  v1::Trial* trial = execution.mutable_trial();
  trial->set_trial_id(id);
  trial->set_attempt(1);
  trial->mutable_workload()->set_model_preset("tiny");
  trial->mutable_workload()->set_batch_size(batch);
  trial->mutable_workload()->set_seed(seed);
  trial->mutable_workload()->set_region(v1::MOE_LAYER);
  trial->mutable_config()->set_moe_backend(backend);
  trial->mutable_config()->set_tp(1);
  trial->mutable_config()->set_ep(1);
  trial->mutable_measurement()->set_warmup_iterations(1);
  trial->mutable_measurement()->set_iterations(3);
  execution.mutable_probe()->mutable_device()->set_measured_read_gbps(10.0);
  execution.set_device_ordinal(-1);
  return execution;
}

}  // namespace moetune::worker::testing
