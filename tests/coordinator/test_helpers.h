// What the coordinator tests register workers with (probes) and report
// trials with (DONE results).
#pragma once

#include <string>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// A CPU worker: both CPU backends available, fused_gemv not built.
inline v1::Probe CpuWorkerProbe() {
  v1::Probe probe;
  probe.mutable_fingerprint()->set_hash("fp");
  probe.mutable_fingerprint()->set_device_name("test cpu");
  probe.mutable_device()->set_measured_read_gbps(10);
  for (const char* name : {"cpu_reference", "cpu_blocked"}) {
    v1::BackendProbe* b = probe.add_backends();
    b->set_name(name);
    b->set_available(true);
  }
  v1::BackendProbe* gpu = probe.add_backends();
  gpu->set_name("fused_gemv");
  gpu->set_reason("built without CUDA");
  return probe;
}

// A DONE report of `trial` by the worker that holds it (whose registration
// token is `token`): the raw samples, their count and the given median,
// measured on `fingerprint`.
inline v1::ReportResultRequest DoneReport(const v1::Trial& trial,
                                          const std::string& token,
                                          const std::vector<double>& samples,
                                          double median_us,
                                          const std::string& fingerprint) {
  v1::ReportResultRequest request;
  request.set_worker_id(trial.worker_id());
  request.set_token(token);
  v1::TrialResult* r = request.mutable_result();
  r->set_trial_id(trial.trial_id());
  r->set_attempt(trial.attempt());
  r->set_outcome(v1::DONE);
  for (double s : samples) r->add_samples_us(s);
  r->mutable_stats()->set_samples(r->samples_us_size());
  r->mutable_stats()->set_median_us(median_us);
  r->mutable_fingerprint()->set_hash(fingerprint);
  return request;
}

}  // namespace moetune::coordinator
