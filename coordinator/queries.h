// Read-side answers shared by the gRPC service and the CLI's offline mode
// (reading a database a finished sweep left): GetBest with its explanation,
// and the worker list with liveness. Stateless; thread-safe as the Store is.
#pragma once

#include "absl/status/statusor.h"
#include "db/store.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// Winner, runner-up, margin, ties and fingerprint per workload (from the
// tuner's SelectBest), plus every backend excluded as unavailable, with why.
absl::StatusOr<v1::GetBestResponse> AnswerGetBest(
    db::Store& store, const v1::GetBestRequest& request);

// Workers as stored; alive when the last heartbeat is within lease_ms of now.
absl::StatusOr<v1::ListWorkersResponse> AnswerListWorkers(db::Store& store,
                                                          int64_t now_ms,
                                                          int64_t lease_ms);

}  // namespace moetune::coordinator
