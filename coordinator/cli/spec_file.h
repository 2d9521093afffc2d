// Reading a sweep spec file: protobuf's JSON mapping (.json) or text format
// (.txtpb, .textproto, .pbtxt). Parsing only; validation is the tuner's.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

absl::StatusOr<v1::SweepSpec> LoadSweepSpec(const std::string& path);
absl::StatusOr<v1::SweepSpec> ParseSweepSpec(const std::string& text,
                                             bool text_format);

}  // namespace moetune::cli
