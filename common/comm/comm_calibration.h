// A measured calibration of the communication model (moetune-comm-bench
// --calibration writes it; a worker's --comm_calibration reads it): loaded
// and checked here, and turned into the model's parameters.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/comm/comm_model.h"
#include "proto/moetune.pb.h"

namespace moetune::comm {

// The file's CommCalibration (protobuf's JSON mapping); INVALID_ARGUMENT
// naming the file and the bad field (allreduce not "nccl" / "oneshot",
// world_size < 1, a negative latency or bandwidth), NOT_FOUND when the file
// cannot be read.
absl::StatusOr<v1::CommCalibration> LoadCommCalibration(
    const std::string& path);

// The model's parameters: the assumptions, with the calibration's stream
// fits replacing them at the worlds it measured; `source` says where the
// figures come from.
CommModelParams ParamsFrom(const v1::CommCalibration& calibration);

}  // namespace moetune::comm
