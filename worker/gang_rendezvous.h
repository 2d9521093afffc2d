// GangRendezvous: how the ranks of a gang trial (a MEASURED trial, one
// process per rank, each on its own worker) meet: an all-gather of bytes
// under a key. Rank 0 posts its ncclUniqueId and the others an empty
// payload under "nccl-id"; every rank posts its CUDA IPC handles under
// "ipc-handles"; each gets every rank's payload, by rank.
//
// Implementations: GrpcGangRendezvous (grpc_gang_rendezvous.h: through the
// coordinator's WorkerControl.Rendezvous, as the trial process runs it) and
// InProcessGangRendezvous (in_process_gang_rendezvous.h: threads as ranks,
// for tests). One object per rank; AllGather is called from one thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace moetune::worker {

class GangRendezvous {
 public:
  virtual ~GangRendezvous() = default;
  // Posts `payload` under `key` as this rank and waits until every rank of
  // the gang posted under it: their payloads, by rank. ABORTED with the
  // coordinator's reason once the gang was torn down (stop the trial);
  // DEADLINE_EXCEEDED when not every rank posted by `deadline`. Posting the
  // same payload under a key again is harmless; a different one is refused.
  virtual absl::StatusOr<std::vector<std::string>> AllGather(
      const std::string& key, const std::string& payload,
      absl::Time deadline) = 0;
};

}  // namespace moetune::worker
