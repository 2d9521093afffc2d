// How a gang trial's rank joins its gang's communication: rank 0 makes
// NCCL's id and the gang relays it through the rendezvous ("nccl-id"); then
// every rank makes its side of the communicator
// (kernels/cuda/comm/comm_gpu.h), the one-shot path exchanging its CUDA IPC
// handles through the rendezvous too ("oneshot-ipc"). Everything under one
// deadline: a rank that never comes makes an error, never a stuck trial.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/moetune.pb.h"
#include "worker/gang_rendezvous.h"
#include "worker/gpu_api.h"

namespace moetune::worker {

struct GangJoin {
  const v1::Gang* gang = nullptr;
  v1::AllReduceImpl all_reduce = v1::ALL_REDUCE_NCCL;  // unset: NCCL
  int device = 0;
  int64_t max_floats = 0;  // the largest sum the step makes
  absl::Duration timeout = absl::Seconds(60);
};

// INVALID_ARGUMENT for an all-reduce implementation this build does not
// know (naming the allowed values);
// the rendezvous' error (ABORTED: the gang was torn down;
// DEADLINE_EXCEEDED); UNAVAILABLE with NCCL's or CUDA's reason.
absl::StatusOr<std::unique_ptr<gpu::GangComm>> JoinGang(
    GpuApi* gpu, const GangJoin& join, GangRendezvous* rendezvous);

}  // namespace moetune::worker
