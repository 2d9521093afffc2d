// Gang placement: which workers run a MEASURED trial of world W, and why
// no set of live workers ever could. Pure functions over a snapshot of the
// live workers (the Scheduler takes it under its mutex, so a placement and
// the gang it forms are one atomic step); thread-safe.
//
// Rules: a gang is W live GPU workers with the same non-empty host_id (one
// machine: NVLink / PCIe between them), every one with the trial's backend
// available, idle (it asked for work and got none since its last grant; the
// worker asking now is idle) and in no live gang. Of the hosts with W such
// workers, the one with the most is preferred (then the asker's, then the
// one whose worker has waited longest); on it, the asker is rank 0 when it
// is there, then the longest waiting (first come, first served; worker id
// breaks ties). A gang forms whole or not at all, and never takes a worker
// another gang holds: no gang ever waits holding part of its members, so
// competing gangs cannot deadlock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backends/descriptor.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// A live worker as placement sees it.
struct GangCandidate {
  std::string worker_id;
  std::string host_id;       // the probe's device.host_id
  bool is_gpu = false;       // the probe's device.is_gpu
  bool has_backend = false;  // the trial's backend is available on it
  // Asked for work and got none since its last grant, and in no live gang.
  bool idle = false;
  int64_t idle_since_ms = 0;  // when it started waiting
};

// The candidate for `worker`'s registration probe (idleness left false).
GangCandidate CandidateOf(const std::string& worker_id, const v1::Probe& probe,
                          const std::string& backend);

// The members by rank (the asker first when it is one of them); empty when
// no host has `world` idle workers for this backend.
std::vector<std::string> PlaceGang(const GangCandidate& asker,
                                   const std::vector<GangCandidate>& others,
                                   int world);

// Why `backend` cannot run MEASURED communication at all ("" when it can):
// only a native GPU backend (`descriptor`; null for an out-of-process one)
// drives NCCL; a CPU backend or a plugin runs one rank's shard.
std::string GangBackendRefusal(const std::string& backend,
                               const backends::BackendDescriptor* descriptor);

// Why no host of the live workers can run a gang of `world` on `backend`,
// however long it waits ("" when one can, or when no worker is live:
// nothing is known yet). `backend_refusal`: GangBackendRefusal's. E.g.
// "needs 8 GPU workers with fused_gemv on one host; the largest host has
// 2".
std::string GangShortfall(const std::vector<GangCandidate>& alive,
                          const std::string& backend,
                          const std::string& backend_refusal, int world);

}  // namespace moetune::coordinator
